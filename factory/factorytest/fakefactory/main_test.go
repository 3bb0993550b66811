package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
)

// Every built-in role on every board and every profile of --profiles
// downloads, at each version it is served at, as the disk-shaped image it
// announces.
func TestServesRolesAndProfiles(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "2MiB", "--profiles", "../../testdata/profiles/good.yaml"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	want, _ := imagetest.RawSHA256(2<<20, 1)
	if !strings.Contains(out.String(), "sha256 "+want) || !strings.Contains(out.String(), "try: ./talosflash-cli flash --role worker") {
		t.Fatalf("output:\n%s", out.String())
	}
	custom, err := factory.LoadProfiles("../../testdata/profiles/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := factory.NewClient(srv.URL, nil)
	all := factory.ExpandBoards(factory.MergeProfiles(factory.BuiltinProfiles(), custom))
	if len(all) != 5 { // controlplane on both boards, the user's worker (rpi_generic), storage, plain
		t.Fatalf("%d images", len(all))
	}
	for _, p := range all {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"v1.14.4", "v1.14.5"} {
			if got := downloadSHA(t, c.ImageURL(id, v, p.Architecture())); got != want {
				t.Fatalf("%s/%s at %s: image sha256 %s, want %s", p.Name, p.TargetBoard(), v, got, want)
			}
		}
	}
}

// downloadSHA is the SHA-256 of the decompressed .raw.xz at url.
func downloadSHA(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	zr, err := xz.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(zr, 64<<20)); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The four role x board schematic IDs, computed offline (docs/BOARDS.md).
var roleBoardIDs = map[string]string{
	"controlplane/rpi4": "29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d",
	"worker/rpi4":       "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9",
	"controlplane/rpi5": "e761366799ebd34f6047dc1ec81548129662ca740498063e623c98eac71a3b81",
	"worker/rpi5":       "a636242df247ad4aad2e36d1026d8d4727b716a3061749bd7b19651e548f65e4",
}

// Measured: each role x board schematic's offline ID is what the fake's
// POST /schematics answers for it (the real API shape: 201, {"id",
// "schematic"}), the schematic is known (GET /schematics/<id>), and its
// image downloads at the default release and the one before it, so a
// cluster flashed one release behind can be upgraded to the next.
func TestRoleBoardSchematicsMatchTheFactory(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "2MiB"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	want, _ := imagetest.RawSHA256(2<<20, 1)
	c := factory.NewClient(srv.URL, nil)
	seen := 0
	for _, b := range factory.Boards() {
		for _, role := range factory.BuiltinRoles() {
			p, err := factory.BuiltinProfile(role, b)
			if err != nil {
				t.Fatal(err)
			}
			offline, err := p.SchematicID()
			if err != nil || offline != roleBoardIDs[role+"/"+string(b)] {
				t.Fatalf("%s/%s: offline ID %s (%v), want %s", role, b, offline, err, roleBoardIDs[role+"/"+string(b)])
			}
			body, _ := p.Schematic().Marshal()
			resp, err := http.Post(srv.URL+"/schematics", "application/yaml", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var reply struct{ ID, Schematic string }
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&reply)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusCreated || reply.ID != offline || reply.Schematic != string(body) {
				t.Fatalf("%s/%s: POST /schematics %s %+v (%v), offline %s", role, b, resp.Status, reply, err, offline)
			}
			if s, err := c.Schematic(context.Background(), offline); err != nil || s.Overlay.Name != b.Overlay().Name {
				t.Fatalf("%s/%s: GET /schematics/%s: %+v %v", role, b, offline, s, err)
			}
			for _, v := range []string{"v1.14.4", "v1.14.5"} {
				if got := downloadSHA(t, c.ImageURL(offline, v, "arm64")); got != want {
					t.Fatalf("%s/%s at %s: sha256 %s", role, b, v, got)
				}
			}
			line := fmt.Sprintf("  %-14s %-5s arm64, schematic %s, Talos v1.14.4, v1.14.5\n", role, b, offline)
			if !strings.Contains(out.String(), line) {
				t.Errorf("output lacks %q:\n%s", line, out.String())
			}
			seen++
		}
	}
	if seen != 4 {
		t.Fatalf("%d role x board images, want 4", seen)
	}
	// The Pi 5's overlay is offered for the versions served.
	overlays, err := c.Overlays(context.Background(), "v1.14.4")
	if err != nil || len(overlays) != 2 || overlays[1].Name != factory.RPi5OverlayName {
		t.Fatalf("overlays at v1.14.4: %+v %v", overlays, err)
	}
}

// --versions chooses the releases served; a profile's own version is
// served too, and a board is never served below its minimum.
func TestVersionsFlag(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "1MiB", "--versions", "v1.12.2, v1.13.0"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := factory.NewClient(srv.URL, nil)
	p4, _ := factory.BuiltinProfile(factory.RoleWorker, factory.BoardRPi4)
	p5, _ := factory.BuiltinProfile(factory.RoleWorker, factory.BoardRPi5)
	id4, _ := p4.SchematicID()
	id5, _ := p5.SchematicID()
	for _, c := range []struct {
		id, version string
		status      int
	}{
		{id4, "v1.12.2", http.StatusOK}, {id4, "v1.13.0", http.StatusOK}, {id4, "v1.14.5", http.StatusOK}, // its own
		{id5, "v1.12.2", http.StatusNotFound}, {id5, "v1.13.0", http.StatusOK}, {id5, "v1.14.5", http.StatusOK},
		{id4, "v1.14.4", http.StatusNotFound},
	} {
		resp, err := http.Head(srv.URL + factorytest.ImagePath(c.id, c.version, "metal-arm64.raw.xz"))
		if err != nil || resp.StatusCode != c.status {
			t.Errorf("%s at %s: %v %v, want %d", c.id[:12], c.version, resp, err, c.status)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	versions, err := c.Versions(context.Background())
	if err != nil || strings.Join(versions, ",") != "v1.12.2,v1.13.0,v1.14.4,v1.14.5" {
		t.Errorf("versions %v %v", versions, err)
	}
	if !strings.Contains(out.String(), "worker         rpi5  arm64, schematic "+id5+", Talos v1.13.0, v1.14.5\n") {
		t.Errorf("output:\n%s", out.String())
	}
	for _, bad := range []string{"1.14.5", ",", "v1.14"} {
		if srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "1MiB", "--versions", bad}, io.Discard); err == nil {
			srv.Close()
			t.Errorf("--versions %q accepted", bad)
		} else if !strings.Contains(err.Error(), "--versions") {
			t.Errorf("--versions %q: %v", bad, err)
		}
	}
}

// Only loopback: anything else is refused before a socket is opened.
func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.168.1.10:8088", "localhost:8088", "[::]:0", "8088"} {
		var out bytes.Buffer
		if srv, err := start([]string{"--listen", addr, "--size", "1MiB"}, &out); err == nil {
			srv.Close()
			t.Errorf("--listen %s accepted", addr)
		} else if !strings.Contains(err.Error(), addr) {
			t.Errorf("--listen %s: %v", addr, err)
		}
	}
}

// The default image takes a node's META, so the README's inventory
// walkthrough (flash --inventory against this fake) can write it: the
// decoded download passes the same head check flash --inventory runs.
func TestDefaultImageTakesMETA(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	id, err := factory.BuiltinProfiles()[0].SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	p := factory.BuiltinProfiles()[0]
	resp, err := http.Get(factory.NewClient(srv.URL, nil).ImageURL(id, p.Version(), p.Architecture()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	zr, err := xz.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 32<<20 {
		t.Fatalf("image is %d bytes, want the default 32 MiB", len(raw))
	}
	if _, err := meta.CheckHead(raw[:imaging.HeadSize], int64(len(raw))); err != nil {
		t.Fatalf("the served image cannot take a node's META: %v", err)
	}
	if want := fmt.Sprintf("sha256 %x", sha256.Sum256(raw)); !strings.Contains(out.String(), want) {
		t.Fatalf("output does not announce the served image's %s:\n%s", want, out.String())
	}
}

// outputHook is start's output, calling on with each line as it comes.
type outputHook struct {
	mu    sync.Mutex
	lines []string
	on    func(line string)
}

func (o *outputHook) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		o.mu.Lock()
		o.lines = append(o.lines, l)
		o.mu.Unlock()
		if o.on != nil {
			o.on(l)
		}
	}
	return len(p), nil
}

var loopbackURL = regexp.MustCompile(`http://127\.[0-9.]+:[0-9]+`)

// It listens before it makes the image and says so; a download asked for
// meanwhile waits for the image (as the real factory's first download
// waits for its build), and it says when it is ready. It used to print
// nothing and refuse connections while a large image was made.
func TestListensWhilePreparingAndSaysReady(t *testing.T) {
	p := factory.BuiltinProfiles()[1]
	id, err := p.SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		status int
		body   []byte
		err    error
	}
	download := make(chan got, 1)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	out := &outputHook{}
	out.on = func(line string) {
		if !strings.Contains(line, "preparing") {
			if strings.HasPrefix(line, "ready") {
				note("ready")
			}
			return
		}
		url := loopbackURL.FindString(line) // never anything but the fake's loopback address
		if url == "" {
			t.Errorf("no loopback URL in %q", line)
			return
		}
		resp, err := http.Get(url + "/versions")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/versions while preparing: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		go func() {
			resp, err := http.Get(factory.NewClient(url, nil).ImageURL(id, p.Version(), p.Architecture()))
			if err != nil {
				download <- got{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			note("downloaded")
			download <- got{resp.StatusCode, body, err}
		}()
	}
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "2MiB"}, out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.Contains(strings.Join(out.lines, "\n"), "preparing") {
		t.Fatalf("it never said it was preparing the image:\n%s", strings.Join(out.lines, "\n"))
	}
	var d got
	select {
	case d = <-download:
	case <-time.After(30 * time.Second):
		t.Fatal("the download asked for while preparing never ended")
	}
	if d.err != nil || d.status != http.StatusOK || len(d.body) == 0 {
		t.Fatalf("download: %d %v (%d bytes)", d.status, d.err, len(d.body))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "ready" || order[1] != "downloaded" {
		t.Fatalf("order %q: want ready, then the download\n%s", order, strings.Join(out.lines, "\n"))
	}
	if !strings.Contains(out.lines[0], "preparing a 2.0 MiB image") || !strings.Contains(out.lines[0], "downloads wait") {
		t.Fatalf("first line %q", out.lines[0])
	}
}

// The try: hints run as written. The CLI line is run through the CLI
// itself (its card a file in a temporary directory instead of /tmp) and
// writes the served image; the app line uses only flags the app's gui
// command defines (gui.go in the repository's root, read with go/parser:
// it is package main, not importable), after `gui`, which main.go routes
// to the app. They used to say `./talosflash --factory URL`, which the CLI
// answers "unknown command", and a flash into a new file without
// --create-file, which is refused.
func TestHintsRunAsWritten(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "2MiB", "--profiles", "../../testdata/profiles/good.yaml"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var cliLine, appLine string
	for _, l := range strings.Split(out.String(), "\n") {
		if c, ok := strings.CutPrefix(l, "try: "); ok {
			cliLine = c
		} else if c, ok := strings.CutPrefix(l, "     ./talosflash gui "); ok {
			appLine = c
		}
	}
	if cliLine == "" || appLine == "" {
		t.Fatalf("no hints:\n%s", out.String())
	}

	// The CLI line, as written but for the card's directory.
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	args := strings.Fields(cliLine)
	if args[0] != "./talosflash-cli" {
		t.Fatalf("CLI hint %q", cliLine)
	}
	card := filepath.Join(dir, "card.img")
	for i, a := range args {
		if a == "/tmp/card.img" {
			args[i] = card
		}
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main(args[1:], cli.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("%q: exit %d\n%s%s", cliLine, code, stdout.String(), stderr.String())
	}
	raw, err := os.ReadFile(card)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := imagetest.RawSHA256(2<<20, 1)
	if got := fmt.Sprintf("%x", sha256.Sum256(raw)); got != want {
		t.Fatalf("the card holds sha256 %s, the fake served %s", got, want)
	}

	// The app line: `gui` and the app's own flags.
	defined := guiFlags(t)
	fields := strings.Fields(appLine)
	for i := 0; i < len(fields); i += 2 {
		name, ok := strings.CutPrefix(fields[i], "--")
		if !ok || !defined[name] {
			t.Errorf("app hint %q: %q is not a flag of `talosflash gui` (%v)", appLine, fields[i], defined)
		}
		if name == "allow-loop" {
			i-- // a bool flag: no value
		}
	}
	if !strings.Contains(appLine, "--factory "+srv.URL) || !strings.Contains(appLine, "--allow-loop") || !strings.Contains(appLine, "--profiles ../../testdata/profiles/good.yaml") {
		t.Errorf("app hint %q", appLine)
	}
	main, err := os.ReadFile("../../../main.go")
	if err != nil || !strings.Contains(string(main), `args[0] == "gui"`) {
		t.Errorf("main.go no longer routes `talosflash gui` to the app (%v)", err)
	}
}

// guiFlags are the flag names runGUIWith in the root's gui.go defines.
func guiFlags(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	// The app's flag set is the one named "gui" (flag.NewFlagSet("gui", ...)),
	// wherever the root package defines it.
	for _, file := range []string{"../../../main.go", "../../../gui.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !definesFlagSet(fn, "gui") {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, isID := sel.X.(*ast.Ident); !isID || id.Name != "fs" {
					return true
				}
				arg := call.Args[0]
				if (sel.Sel.Name == "Var" || strings.HasSuffix(sel.Sel.Name, "Var")) && len(call.Args) > 1 {
					arg = call.Args[1]
				}
				if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					names[strings.Trim(lit.Value, `"`)] = true
				}
				return true
			})
		}
	}
	if !names["factory"] || len(names) < 3 {
		t.Fatalf("the app's flags (flag set \"gui\") not found: %v", names)
	}
	return names
}

// definesFlagSet: fn calls flag.NewFlagSet(name, ...).
func definesFlagSet(fn *ast.FuncDecl, name string) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewFlagSet" && len(call.Args) > 0 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Value == strconv.Quote(name) {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
