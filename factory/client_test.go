package factory

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/internal/testkit"
)

func newTestClient(t *testing.T) (*Client, *factorytest.Server) {
	t.Helper()

	srv := factorytest.New(t)

	return NewClient(srv.URL+"/", srv.Client()), srv
}

func TestRegister(t *testing.T) {
	c, srv := newTestClient(t)
	ctx := context.Background()

	for _, p := range BuiltinProfiles() {
		id, err := c.Register(ctx, p.Schematic())
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}

		want, _ := p.SchematicID()
		if id != want {
			t.Fatalf("%s: id %s, want %s", p.Name, id, want)
		}
	}

	posts := srv.RequestsTo("/schematics")
	if len(posts) != 2 || posts[0].Method != http.MethodPost || posts[0].Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("server saw %+v", posts)
	}

	if string(posts[0].Body) != controlPlaneYAML || string(posts[1].Body) != workerYAML {
		t.Fatalf("posted bodies:\n%s\n%s", posts[0].Body, posts[1].Body)
	}

	if ids := srv.Schematics(); len(ids) != 2 {
		t.Fatalf("server stored %v", ids)
	}
}

func TestRegisterIDMismatch(t *testing.T) {
	c, srv := newTestClient(t)
	bogus := strings.Repeat("0", 64)
	srv.Inject("/schematics", factorytest.Fault{Kind: factorytest.FaultStatus, Status: http.StatusCreated, Body: `{"id":"` + bogus + `"}`})

	p, _ := FindProfile(BuiltinProfiles(), "worker")

	_, err := c.Register(context.Background(), p.Schematic())

	var mm *IDMismatchError
	if !errors.Is(err, ErrIDMismatch) || !errors.As(err, &mm) || mm.Remote != bogus || mm.Local != workerID {
		t.Fatalf("want ID mismatch error, got %v", err)
	}
}

func TestRegisterRejected(t *testing.T) {
	c, srv := newTestClient(t)
	srv.FailPath("/schematics", http.StatusBadRequest, "yaml: unmarshal errors:\n  line 3: field foo not found")

	_, err := c.Register(context.Background(), BuiltinProfiles()[0].Schematic())

	var he *HTTPError
	if !errors.Is(err, ErrSchematicRejected) || !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Body, "line 3: field foo not found") {
		t.Fatalf("got %v", err)
	}

	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error should be one line: %q", err)
	}
}

func TestSchematicLookup(t *testing.T) {
	c, srv := newTestClient(t)
	ctx := context.Background()
	p, _ := FindProfile(BuiltinProfiles(), "controlplane")

	id, err := c.Register(ctx, p.Schematic())
	if err != nil {
		t.Fatal(err)
	}

	s, err := c.Schematic(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	if got := s.Customization.SystemExtensions.OfficialExtensions; len(got) != 1 || got[0] != NewtExtension || s.Overlay.Name != "rpi_generic" {
		t.Fatalf("fetched %+v", s)
	}

	_, err = c.Schematic(ctx, strings.Repeat("a", 64))
	if !errors.Is(err, ErrUnknownSchematic) || !errors.Is(err, ErrNotFound) || errors.Is(err, ErrSchematicLookupUnsupported) {
		t.Fatalf("unknown schematic: %v", err)
	}

	before := len(srv.Requests())

	if _, err := c.Schematic(ctx, "../versions"); err == nil || len(srv.Requests()) != before {
		t.Fatalf("malformed ID must be refused locally: %v", err)
	}

	srv.DisableSchematicLookup() // like image-factory v0.8.4

	_, err = c.Schematic(ctx, id)
	if !errors.Is(err, ErrSchematicLookupUnsupported) || errors.Is(err, ErrUnknownSchematic) {
		t.Fatalf("old factory: %v", err)
	}

	srv.FailPath("/schematics/"+id, http.StatusMethodNotAllowed, "Method Not Allowed")

	if _, err = c.Schematic(ctx, id); !errors.Is(err, ErrSchematicLookupUnsupported) {
		t.Fatalf("405: %v", err)
	}
}

func TestSchematicWrongContent(t *testing.T) {
	c, srv := newTestClient(t)
	srv.FailPath("/schematics/"+workerID, http.StatusOK, controlPlaneYAML)

	if _, err := c.Schematic(context.Background(), workerID); !errors.Is(err, ErrBadResponse) {
		t.Fatalf("a schematic that does not hash to the asked ID must be refused: %v", err)
	}
}

func TestVersionsExtensionsOverlays(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := context.Background()

	v, err := c.Versions(ctx)
	if err != nil || strings.Join(v, ",") != strings.Join(factorytest.DefaultVersions, ",") {
		t.Fatalf("versions %v: %v", v, err)
	}

	exts, err := c.Extensions(ctx, "v1.14.5")
	if err != nil || len(exts) != len(factorytest.DefaultExtensions) || exts[0].Name != "siderolabs/newt" || exts[0].Digest == "" || exts[0].Ref == "" {
		t.Fatalf("extensions %+v: %v", exts, err)
	}

	ovs, err := c.Overlays(ctx, "v1.14.5")
	if err != nil || len(ovs) == 0 || ovs[0].Name != "rpi_generic" || ovs[0].Image != RPiOverlayImage {
		t.Fatalf("overlays %+v: %v", ovs, err)
	}

	for _, call := range []func() error{
		func() error { _, err := c.Extensions(ctx, "v9.9.9"); return err },
		func() error { _, err := c.Overlays(ctx, "v9.9.9"); return err },
	} {
		if err := call(); !errors.Is(err, ErrUnknownVersion) || !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown version: %v", err)
		}
	}

	if _, err := c.Extensions(ctx, "latest"); err == nil || !strings.Contains(err.Error(), "v1.14.5") {
		t.Fatalf("bad version string: %v", err)
	}
}

func TestServerErrors(t *testing.T) {
	c, srv := newTestClient(t)
	ctx := context.Background()

	srv.FailPath("/versions", http.StatusInternalServerError, "  storage backend\n\n exploded  ")

	_, err := c.Versions(ctx)

	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 500 || he.Body != "storage backend exploded" || errors.Is(err, ErrNotFound) {
		t.Fatalf("500: %v", err)
	}

	if !strings.Contains(err.Error(), "HTTP 500 Internal Server Error: storage backend exploded") {
		t.Fatalf("message: %q", err)
	}

	srv.ClearFaults()
	srv.FailPath("/versions", http.StatusOK, "<html>captive portal</html>")

	if _, err = c.Versions(ctx); !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), "captive portal") {
		t.Fatalf("bad JSON: %v", err)
	}

	srv.ClearFaults()
	srv.FailPath("/versions", http.StatusBadGateway, strings.Repeat("x", 5000))

	if _, err = c.Versions(ctx); !errors.As(err, &he) || len(he.Body) > maxErrorBody+3 {
		t.Fatalf("long body not trimmed: %d", len(he.Body))
	}
}

func TestConnectionRefused(t *testing.T) {
	addr := testkit.ClosedAddr(t)

	c := NewClient("http://"+addr, nil)

	_, err := c.Versions(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("got %v", err)
	}
}

// A connection lost in the middle of a reply is the factory being
// unreachable (CLI exit 3), like one refused before it.
func TestConnectionLostMidReply(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()

		_, _ = conn.Read(make([]byte, 4096))
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[\"v1.")
	}()

	_, err = NewClient("http://"+l.Addr().String(), nil).Versions(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v", err)
	}
}

func TestCallerCancel(t *testing.T) {
	c, srv := newTestClient(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := c.Versions(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) || len(srv.Requests()) != 0 {
		t.Fatalf("got %v", err)
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, u := range []string{"factory.talos.dev", "ftp://x", "http://", "http://x/?q=1"} {
		if _, err := NewClient(u, nil).Versions(context.Background()); err == nil || errors.Is(err, ErrUnreachable) {
			t.Errorf("%q: want a URL error, got %v", u, err)
		}
	}

	if got := NewClient("", nil).BaseURL(); got != DefaultBaseURL {
		t.Errorf("default base %q", got)
	}
}

func TestImageURLDownload(t *testing.T) {
	c, srv := newTestClient(t)

	want := "http://" + strings.TrimPrefix(srv.URL, "http://") + "/image/" + workerID + "/v1.14.5/metal-arm64.raw.xz"
	if got := c.ImageURL(workerID, "v1.14.5", ""); got != want {
		t.Fatalf("ImageURL = %s, want %s", got, want)
	}

	data := bytes.Repeat([]byte("talos"), 1000)
	srv.AddImage(workerID, "v1.14.5", "metal-arm64.raw.xz", data)

	resp, err := c.HTTPClient().Get(c.ImageURL(workerID, "v1.14.5", "arm64"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	got, _ := io.ReadAll(resp.Body)
	if !bytes.Equal(got, data) || srv.BytesServed() != int64(len(data)) {
		t.Fatalf("downloaded %d bytes, server counted %d", len(got), srv.BytesServed())
	}

	if h := NewClient("https://factory.example.lan:8443", nil).RegistryHost(); h != "factory.example.lan:8443" {
		t.Fatalf("registry host %q", h)
	}
}

func TestValidateProfile(t *testing.T) {
	c, srv := newTestClient(t)
	ctx := context.Background()

	for _, p := range BuiltinProfiles() {
		if err := c.ValidateProfile(ctx, p); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}

	base, _ := FindProfile(BuiltinProfiles(), "controlplane")

	typo := base
	typo.Extensions = []string{"siderolabs/newtt", "siderolabs/iscsi-tool"}

	err := c.ValidateProfile(ctx, typo)
	if !errors.Is(err, ErrUnknownExtension) ||
		!strings.Contains(err.Error(), `"siderolabs/newtt" (did you mean siderolabs/newt?)`) ||
		!strings.Contains(err.Error(), `"siderolabs/iscsi-tool" (did you mean siderolabs/iscsi-tools?)`) {
		t.Fatalf("typo: %v", err)
	}

	old := base
	old.TalosVersion = "v1.14.9"

	if err := c.ValidateProfile(ctx, old); !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), "v1.14.5") {
		t.Fatalf("unknown version: %v", err)
	}

	// A profile naming its own overlay (a built-in's overlay edited names
	// no board any more: Board is cleared with it).
	ov := base
	ov.Board, ov.AnyBoard = "", false
	ov.Overlay.Name = "rpi_generc"

	if err := c.ValidateProfile(ctx, ov); !errors.Is(err, ErrUnknownOverlay) || !strings.Contains(err.Error(), "did you mean rpi_generic") {
		t.Fatalf("unknown overlay: %v", err)
	}

	ov = base
	ov.Board, ov.AnyBoard = "", false
	ov.Overlay.Image = "ghcr.io/someone/sbc-raspberrypi"

	if err := c.ValidateProfile(ctx, ov); !errors.Is(err, ErrUnknownOverlay) || !strings.Contains(err.Error(), RPiOverlayImage) {
		t.Fatalf("overlay image mismatch: %v", err)
	}

	// An extension dropped from a version is caught for that version only.
	srv.SetExtensions("v1.14.5", nil)

	if err := c.ValidateProfile(ctx, base); !errors.Is(err, ErrUnknownExtension) {
		t.Fatalf("extension missing for version: %v", err)
	}

	if err := c.ValidateProfile(ctx, Profile{Name: "bad", Extensions: []string{"newt"}}); err == nil {
		t.Fatal("invalid profile must fail before any request")
	}
}

// The factory's HTTP client also downloads images: it must not give up on
// headers while Image Factory builds an image (minutes on a first request).
func TestHTTPClientWaitsForImageBuild(t *testing.T) {
	tr, ok := NewHTTPClient().Transport.(*http.Transport)
	if !ok || tr.ResponseHeaderTimeout != 0 || NewHTTPClient().Timeout != 0 {
		t.Fatalf("transport %+v: want no header or overall timeout", tr)
	}
}

// An unknown version names the newest offered and the newest of its own
// release line, compared as versions (it used to list the first three
// "close" strings in list order, missing v1.14.6 and v1.15.0).
func TestDescribeVersions(t *testing.T) {
	offered := []string{"v1.13.0", "v1.14.4", "v1.14.5", "v1.14.6", "v1.15.0-beta.0", "v1.15.0"}
	for want, msg := range map[string]string{
		"v1.99.0": "newest: v1.15.0",
		"v1.14.9": "newest of v1.14: v1.14.6; newest: v1.15.0",
		"v1.15.3": "newest: v1.15.0",
	} {
		if got := describeVersions(offered, want); got != msg {
			t.Errorf("describeVersions(%s) = %q, want %q", want, got, msg)
		}
	}
	if got := describeVersions(nil, "v1.14.5"); got != "it offers none" {
		t.Errorf("no versions: %q", got)
	}
}

// An unusable factory URL sends nothing anywhere: every request through the
// client, the downloads' included (HTTPClient), fails with the reason
// before the transport it was given is asked to dial or resolve a name.
func TestBadBaseURLSendsNothing(t *testing.T) {
	var asked atomic.Int32
	given := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		asked.Add(1)
		return nil, errors.New("dialled")
	})}
	for _, base := range []string{"preparing", "ftp://127.0.0.1:1", "http://", "http://127.0.0.1:1/?q=1", "::"} {
		c := NewClient(base, given)
		if _, err := c.Versions(context.Background()); err == nil || !strings.Contains(err.Error(), "image factory URL") {
			t.Errorf("%q: Versions: %v", base, err)
		}
		resp, err := c.HTTPClient().Get(c.ImageURL(EmptySchematicID, "v1.14.5", "arm64"))
		if err == nil {
			resp.Body.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "image factory URL") {
			t.Errorf("%q: download: %v", base, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the transport was asked %d times", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
