package gui

import (
	"bufio"
	"bytes"
	"context"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/godbus/dbus/v5"
)

// openChooser runs open (a step's "Choose…" action) and waits for the
// fallback chooser (the harness has no portal).
func (h *harness) openChooser(open func()) *fileChooser {
	h.t.Helper()
	h.onUI(open)
	var c *fileChooser
	h.waitFor("the file chooser", func() bool { c = h.ui.chooser; return c != nil && h.ui.modal == c.modal })
	return c
}

// Without a portal the app's own chooser opens with the path field focused
// and the home folder filled in; a typed path is used with Enter, a folder
// or a missing file is named in the dialog, and the next chooser of that
// kind starts in the folder used last.
func TestFallbackChooserTypedPathAndLastFolder(t *testing.T) {
	h := newHarness(t, nil)
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	img := filepath.Join(dir, "custom.raw.xz")
	if err := os.WriteFile(img, h.image.XZ, 0o600); err != nil {
		t.Fatal(err)
	}

	c := h.openChooser(h.ui.image.openImageFile)
	h.onUI(func() {
		if got := c.path.Text; got != home+"/" {
			t.Fatalf("path field %q, want the home folder %q", got, home+"/")
		}
		if h.ui.Window.Canvas().Focused() != c.path {
			t.Fatal("the path field does not have the focus")
		}
		c.path.SetText(dir)
		c.path.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		if h.ui.modal != c.modal || !c.hint.Visible() || !strings.Contains(c.hint.Text, "is a folder") {
			t.Fatalf("a folder was accepted or not named: hint %q", c.hint.Text)
		}
		c.path.SetText(filepath.Join(dir, "nope.raw.xz"))
		h.ui.typedKey(&fyne.KeyEvent{Name: fyne.KeyReturn}) // Enter with the focus elsewhere: Open
		if h.ui.modal != c.modal || !strings.Contains(c.hint.Text, "no such file") {
			t.Fatalf("a missing file was accepted: hint %q", c.hint.Text)
		}
		c.path.SetText(img)
		c.path.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		if h.ui.modal != nil || h.ui.chooser != nil || h.ui.choosing {
			t.Fatal("the chooser stayed open after a file was chosen")
		}
		if ch := h.ui.session.Choice(); ch == nil || ch.LocalPath != img {
			t.Fatalf("choice %+v, want the local file %s", ch, img)
		}
	})
	// The next local image starts where the last one was.
	c = h.openChooser(h.ui.image.openImageFile)
	h.onUI(func() {
		if got := c.path.Text; got != dir+"/" {
			t.Fatalf("second chooser starts at %q, want the last folder %q", got, dir+"/")
		}
		h.ui.typedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		if h.ui.modal != nil || h.ui.choosing {
			t.Fatal("Esc did not close the chooser")
		}
	})
	// Another kind of file keeps its own folder.
	c = h.openChooser(h.ui.image.openInstallerFile)
	h.onUI(func() {
		if got := c.path.Text; got != home+"/" {
			t.Fatalf("installer chooser starts at %q, want home", got)
		}
		h.ui.escape()
	})
}

// Browse… opens Fyne's dialog at the window's size over the chooser; Esc
// closes only it, and no "Getting favorite locations" line reaches the log
// (the test's HOME has none of the XDG folders).
func TestFallbackChooserBrowse(t *testing.T) {
	h := newHarness(t, nil)
	t.Setenv("HOME", t.TempDir())
	var logged bytes.Buffer
	prev := log.Writer()
	log.SetOutput(&quietFyneLog{out: &logged})
	t.Cleanup(func() { log.SetOutput(prev) })

	c := h.openChooser(h.ui.image.openImageFile)
	h.onUI(func() {
		test.Tap(c.browse)
		m := h.ui.modal
		if m == nil || !m.files {
			t.Fatal("Browse… did not open the file dialog")
		}
		if w, size := h.ui.Window.Canvas().Overlays().Top().Size(), h.ui.Window.Canvas().Size(); w.Width < size.Width-80 || w.Height < size.Height-80 {
			t.Errorf("file dialog %v in a %v window: not large", w, size)
		}
		h.ui.typedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		if h.ui.modal != c.modal {
			t.Fatal("Esc in the file dialog lost the chooser")
		}
		h.ui.typedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	})
	log.Println("Fyne error:  Getting favorite locations")
	log.Println("  Cause: this computer does not define a VIDEOS folder")
	log.Println("  At: file.go:396")
	log.Println("something else")
	if s := logged.String(); strings.Contains(s, "favorite") || strings.Contains(s, "VIDEOS") || !strings.Contains(s, "something else") {
		t.Fatalf("log:\n%s", s)
	}
}

// fakePortal is org.freedesktop.portal.FileChooser on a private session bus:
// it records each OpenFile and answers with its URI (or a cancel).
type fakePortal struct {
	conn *dbus.Conn
	mu   sync.Mutex
	reqs []portalCall
	uri  string // "" cancels
}

type portalCall struct {
	Sender, Parent, Title string
	Opts                  map[string]dbus.Variant
}

// OpenFile is the portal method: it answers at once, on the handle the
// caller subscribed to (a portal answers after the user chose; answering
// at once checks the client subscribed before calling).
func (p *fakePortal) OpenFile(sender dbus.Sender, parent, title string, opts map[string]dbus.Variant) (dbus.ObjectPath, *dbus.Error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, portalCall{string(sender), parent, title, opts})
	uri := p.uri
	p.mu.Unlock()
	token, _ := opts["handle_token"].Value().(string)
	handle := dbus.ObjectPath("/org/freedesktop/portal/desktop/request/" +
		strings.ReplaceAll(strings.TrimPrefix(string(sender), ":"), ".", "_") + "/" + token)
	status, results := uint32(1), map[string]dbus.Variant{}
	if uri != "" {
		status, results["uris"] = 0, dbus.MakeVariant([]string{uri})
	}
	// A signal for another request first: only ours is the answer.
	_ = p.conn.Emit("/org/freedesktop/portal/desktop/request/other/x", portalRequest+".Response", uint32(0),
		map[string]dbus.Variant{"uris": dbus.MakeVariant([]string{"file:///etc/passwd"})})
	if err := p.conn.Emit(handle, portalRequest+".Response", status, results); err != nil {
		return "", dbus.MakeFailedError(err)
	}
	return handle, nil
}

func (p *fakePortal) calls() []portalCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]portalCall(nil), p.reqs...)
}

// privateBus starts dbus-daemon on a socket in a temp dir (no service
// activation: nothing but the test's own names) and points
// DBUS_SESSION_BUS_ADDRESS at it.
func privateBus(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon not installed (scripts/setup.sh installs the dbus package)")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(`<busconfig><type>session</type><listen>unix:dir=`+dir+`</listen>
<auth>EXTERNAL</auth><policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	addr := strings.TrimSpace(line)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
	return addr
}

func startFakePortal(t *testing.T, addr, uri string) *fakePortal {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p := &fakePortal{conn: conn, uri: uri}
	if err := conn.Export(p, portalPath, "org.freedesktop.portal.FileChooser"); err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName(portalName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v %v", portalName, reply, err)
	}
	return p
}

// The portal's chooser: the request names the title, the filter and the
// last folder, and the answer for our handle is the file, not another
// request's; a cancel is no file; a bus without a portal is ErrNoPortal.
func TestPortalOpenFile(t *testing.T) {
	addr := privateBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// No portal on the bus yet: the fallback's case.
	if _, err := PortalOpenFile(ctx, FileRequest{Title: "x"}); err == nil || !strings.Contains(err.Error(), ErrNoPortal.Error()) {
		t.Fatalf("no portal: err %v, want ErrNoPortal", err)
	}

	dir := t.TempDir()
	want := filepath.Join(dir, "my worker.yaml")
	p := startFakePortal(t, addr, (&url.URL{Scheme: "file", Path: want}).String())
	got, err := PortalOpenFile(ctx, FileRequest{Title: "Choose the machine config", Accept: "Check", FilterName: "Machine configs",
		Exts: []string{".yaml"}, Folder: dir, Parent: "x11:1a"})
	if err != nil || got != want {
		t.Fatalf("PortalOpenFile = %q, %v; want %q", got, err, want)
	}
	c := p.calls()[0]
	if c.Title != "Choose the machine config" || c.Parent != "x11:1a" {
		t.Errorf("title %q parent %q", c.Title, c.Parent)
	}
	if f, _ := c.Opts["current_folder"].Value().([]byte); string(f) != dir+"\x00" {
		t.Errorf("current_folder %q, want %q NUL-terminated", f, dir)
	}
	if s := c.Opts["filters"].String(); !strings.Contains(s, "Machine configs") || !strings.Contains(s, "*.yaml") || !strings.Contains(s, "*.YAML") {
		t.Errorf("filters %s", s)
	}
	if l, _ := c.Opts["accept_label"].Value().(string); l != "Check" {
		t.Errorf("accept_label %q", l)
	}

	p.mu.Lock()
	p.uri = ""
	p.mu.Unlock()
	if got, err := PortalOpenFile(ctx, FileRequest{Title: "x"}); err != nil || got != "" {
		t.Fatalf("cancelled: %q, %v; want no file, no error", got, err)
	}
}

// In the app, "Use a local image file…" goes to the portal and uses its
// answer; no fallback dialog opens.
func TestPortalChooserInTheApp(t *testing.T) {
	addr := privateBus(t)
	h := newHarness(t, nil)
	img := filepath.Join(t.TempDir(), "from-portal.raw.xz")
	if err := os.WriteFile(img, h.image.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startFakePortal(t, addr, "file://"+img)
	h.ui.deps.PortalOpenFile = PortalOpenFile
	h.onUI(h.ui.image.openImageFile)
	h.waitFor("the portal's file as the choice", func() bool {
		ch := h.ui.session.Choice()
		return ch != nil && ch.LocalPath == img
	})
	h.onUI(func() {
		if h.ui.chooser != nil || h.ui.choosing {
			t.Fatal("the fallback chooser opened although the portal answered")
		}
	})
	if n := len(p.calls()); n != 1 {
		t.Fatalf("portal got %d requests", n)
	}
	if f, _ := p.calls()[0].Opts["current_folder"].Value().([]byte); len(f) == 0 {
		t.Error("no current_folder sent")
	}
}
