package gui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// The desktop's own file chooser, asked for through the XDG desktop portal
// (org.freedesktop.portal.FileChooser on the session bus), as Raspberry Pi
// Imager and Etcher use it. The request follows the portal's documented
// sequence: subscribe to the Response signal on the request's handle
// (derived from our bus name and a fresh token) before calling OpenFile,
// so a fast answer is never missed, and read only that request's Response.
// (rymdport/portal's filechooser subscribes after the call, to any
// Request.Response on the shared session connection Fyne also uses, which
// can take another signal as the answer.)

// ErrNoPortal says no desktop portal answered: the app's own dialog is used.
var ErrNoPortal = errors.New("no desktop portal answered")

const (
	portalName      = "org.freedesktop.portal.Desktop"
	portalPath      = dbus.ObjectPath("/org/freedesktop/portal/desktop")
	portalOpenFile  = "org.freedesktop.portal.FileChooser.OpenFile"
	portalRequest   = "org.freedesktop.portal.Request"
	portalCallLimit = 10 * time.Second // the call itself (not the user's choice); includes activation
)

// FileRequest is what a file chooser is asked for.
type FileRequest struct {
	Title  string // "Choose a machine config"
	Accept string // the accept button's label, "" for the default
	// Filter names the files offered ("Machine configs") and their
	// extensions (".yaml"); none: every file.
	FilterName string
	Exts       []string
	Folder     string // suggested folder, "" none
	Parent     string // the parent window ("x11:1a00003"), "" unknown
}

// portalAddress is the session bus the portal is on, "" when there is none.
// It never autolaunches a bus (dbus-launch): no bus means no portal.
func portalAddress() string {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a
	}
	if runtime.GOOS != "linux" {
		return ""
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		p := filepath.Join(dir, "bus")
		if st, err := os.Stat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
			return "unix:path=" + p
		}
	}
	return ""
}

// PortalOpenFile asks the desktop portal for one file and returns its path;
// "" with a nil error when the user cancelled. ErrNoPortal (wrapped) means
// no portal handles the request: use another chooser. ctx cancels the
// request (the portal closes its dialog).
func PortalOpenFile(ctx context.Context, req FileRequest) (string, error) {
	addr := portalAddress()
	if addr == "" {
		return "", fmt.Errorf("%w: no session bus", ErrNoPortal)
	}
	conn, err := dbus.Connect(addr) // a private connection, closed after this request
	if err != nil {
		return "", fmt.Errorf("%w: session bus: %v", ErrNoPortal, err)
	}
	defer conn.Close()

	names := conn.Names()
	if len(names) == 0 {
		return "", fmt.Errorf("%w: no bus name", ErrNoPortal)
	}
	token := newToken()
	sender := strings.ReplaceAll(strings.TrimPrefix(names[0], ":"), ".", "_")
	handle := dbus.ObjectPath("/org/freedesktop/portal/desktop/request/" + sender + "/" + token)
	signals := make(chan *dbus.Signal, 8)
	conn.Signal(signals)
	callCtx, cancel := context.WithTimeout(ctx, portalCallLimit)
	defer cancel()
	if err := conn.AddMatchSignalContext(callCtx, dbus.WithMatchInterface(portalRequest), dbus.WithMatchMember("Response"),
		dbus.WithMatchObjectPath(handle)); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoPortal, err)
	}

	var got dbus.ObjectPath
	obj := conn.Object(portalName, portalPath)
	if err := obj.CallWithContext(callCtx, portalOpenFile, 0, req.Parent, req.Title, portalOptions(req, token)).Store(&got); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: %v", ErrNoPortal, err) // no portal, or one without a file chooser
	}
	if got != handle { // a portal older than handle_token: its own handle
		_ = conn.AddMatchSignalContext(callCtx, dbus.WithMatchInterface(portalRequest), dbus.WithMatchMember("Response"),
			dbus.WithMatchObjectPath(got))
	}
	for {
		select {
		case <-ctx.Done():
			_ = conn.Object(portalName, got).Call(portalRequest+".Close", dbus.FlagNoReplyExpected).Err
			return "", ctx.Err()
		case s, ok := <-signals:
			if !ok {
				return "", fmt.Errorf("the session bus closed while the file chooser was open")
			}
			if s.Name != portalRequest+".Response" || (s.Path != got && s.Path != handle) {
				continue
			}
			return portalResponse(s.Body)
		}
	}
}

// portalOptions are OpenFile's options (a{sv}).
func portalOptions(req FileRequest, token string) map[string]dbus.Variant {
	opts := map[string]dbus.Variant{
		"handle_token": dbus.MakeVariant(token),
		"modal":        dbus.MakeVariant(true),
		"multiple":     dbus.MakeVariant(false),
	}
	if req.Accept != "" {
		opts["accept_label"] = dbus.MakeVariant(req.Accept)
	}
	if len(req.Exts) > 0 {
		type rule struct {
			Type    uint32 // 0: a glob pattern
			Pattern string
		}
		type filter struct {
			Name  string
			Rules []rule
		}
		f := filter{Name: req.FilterName}
		for _, e := range req.Exts {
			f.Rules = append(f.Rules, rule{0, "*" + e}, rule{0, "*" + strings.ToUpper(e)}) // globs are case-sensitive
		}
		all := filter{Name: "All files", Rules: []rule{{0, "*"}}}
		opts["filters"] = dbus.MakeVariant([]filter{f, all})
		opts["current_filter"] = dbus.MakeVariant(f)
	}
	if req.Folder != "" {
		opts["current_folder"] = dbus.MakeVariant(append([]byte(req.Folder), 0)) // ay, NUL-terminated
	}
	return opts
}

// portalResponse reads a Request.Response: (u status, a{sv} results).
func portalResponse(body []any) (string, error) {
	if len(body) != 2 {
		return "", fmt.Errorf("the file chooser answered %d values, want 2", len(body))
	}
	status, ok := body[0].(uint32)
	results, ok2 := body[1].(map[string]dbus.Variant)
	if !ok || !ok2 {
		return "", errors.New("the file chooser's answer is not (u, a{sv})")
	}
	switch status {
	case 0:
	case 1:
		return "", nil // cancelled
	default:
		return "", errors.New("the file chooser ended without a choice")
	}
	var uris []string
	if v, ok := results["uris"]; ok {
		uris, _ = v.Value().([]string)
	}
	if len(uris) == 0 {
		return "", nil
	}
	u, err := url.Parse(uris[0])
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", fmt.Errorf("the file chooser returned %q, not a local file", uris[0])
	}
	return u.Path, nil
}

func newToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "talosflash_" + hex.EncodeToString(b)
}
