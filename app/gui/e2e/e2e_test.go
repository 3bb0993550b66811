// Package e2e drives the real talosflash binary in a real window: Xvfb,
// keyboard input through xdotool (XTEST), the fake Image Factory and a fake
// Talos node on loopback, and a loop device as the card. It flashes the
// loop device through the UI, checks the bytes on it and in the cache,
// finds the node with "Scan this network" and by its address, and captures
// each step (TALOSFLASH_SCREENSHOTS=dir keeps them: scripts/screenshots.sh).
// Nothing leaves 127.0.0.0/8: the app is started with --subnet set to the
// node's one loopback address, so its scan covers nothing else.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/internal/xvfbtest"
	"github.com/talosflash/talosflash/node/nodetest"
)

// display is this test's own X display, picked free by Xvfb itself
// (-displayfd): a fixed number collides with any other X server.
var display string

// The fake node: its own loopback address on Talos' port, scanned alone.
const (
	nodeAddr   = "127.0.0.131:50000"
	nodeSubnet = "127.0.0.131/32"
)

const (
	imageSize = 24 << 20 // the raw image written to the card
	cardSize  = 32 << 20
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/setup.sh installs it): the real-window test needs Xvfb, xdotool and ImageMagick's import", tool)
		}
	}
}

func TestRealWindowFlashesLoopDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under Xvfb")
	}
	need(t, "Xvfb", "xdotool", "import", "losetup")
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach a loop device as the card")
	}
	dir := t.TempDir()
	shots := os.Getenv("TALOSFLASH_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(dir, "shots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(dir, "talosflash")
	build := exec.Command("go", "build", "-o", bin, "github.com/talosflash/talosflash")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	// The factory serves a generated image for every built-in role, through
	// a throttle so the progress can be seen (and captured) mid-way.
	fx := imagetest.New(t, imageSize, 7, 1<<20)
	srv := factorytest.New(t)
	for _, p := range factory.BuiltinProfiles() {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", fx.XZ)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", fx.Zstd(t))
	}
	factoryURL := throttled(t, srv.URL)
	cp, err := factory.FindProfile(factory.BuiltinProfiles(), "controlplane")
	if err != nil {
		t.Fatal(err)
	}
	cpID, _ := cp.SchematicID()
	// The node listens where the app scans: one loopback address, given
	// to the app with --subnet, so a scan cannot leave 127.0.0.0/8.
	nd := nodetest.Start(t, nodetest.Options{Addr: nodeAddr, Schematic: cp.Schematic()})

	cardDir, err := os.MkdirTemp("", "talosflash-e2e-") // a short path: it is shown in the window
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(cardDir) })
	loop := attachLoop(t, filepath.Join(cardDir, "sdcard.img"), cardSize)
	loop2 := attachLoop(t, filepath.Join(cardDir, "sdcard2.img"), cardSize) // two cards written at once
	startXvfb(t)

	home := filepath.Join(dir, "home")
	cpConfig, err := os.ReadFile(testkit.TestdataPath(t, "talos114/valid/controlplane.yaml")) // as talosctl gen config v1.14 writes it, with the Newt ExtensionServiceConfig
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "controlplane.yaml"), cpConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	// The app on the display; should the X server be gone before the app
	// opened it (another X server stopping on its number unlinks its
	// socket: xvfbtest), a new one, once.
	var appLog *xvfbtest.Buffer
	var win string
	for attempt := 1; ; attempt++ {
		app := exec.Command(bin, "gui", "--factory", factoryURL, "--allow-loop", "--device", loop, "--device", loop2, "--subnet", nodeSubnet)
		app.Env = append(cleanEnv(), "DISPLAY="+display, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
			"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "LIBGL_ALWAYS_SOFTWARE=1", "LANG=C.UTF-8", "NO_PROXY=*")
		log := &xvfbtest.Buffer{}
		appLog = log
		app.Stdout, app.Stderr = log, log
		if err := app.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = app.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = app.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = app.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("app output:\n%s", log.String())
			}
		})
		var ok bool
		win, ok = waitWindow(t, exited)
		if ok {
			break
		}
		if attempt > 1 || !strings.Contains(log.String(), "cannot open the display") {
			t.Fatalf("the app ended before its window showed:\n%s", log.String())
		}
		t.Logf("the X server %s went away before the app opened it; a new one", display)
		startXvfb(t)
	}
	// Keys go to the window in order and the app handles them in order:
	// no pause between them. Where a key starts work in the background (a
	// file chooser, the checks), the test waits for its effect on the
	// screen or on the fakes, bounded, before the next key.
	key := func(keys ...string) {
		t.Helper()
		x(t, append([]string{"key", "--window", win, "--delay", "80"}, keys...)...)
	}
	window := "1000x700+0+0"
	shotTo := func(dir, name, crop string) {
		t.Helper()
		waitStable(t, name, crop) // the frame drawn, not half-way
		file := filepath.Join(dir, name+".png")
		cmd := exec.Command("import", "-display", display, "-window", "root", "-crop", crop, "+repage",
			"-strip", "-depth", "8", "-colors", "256", "PNG8:"+file)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("screenshot %s: %v\n%s", name, err, out)
		}
	}
	shot := func(name string) { t.Helper(); shotTo(shots, name, window) }

	// The step tabs as drawn say which step shows, and a dialog dims
	// them. onStep waits (bounded) until step n shows with no dialog: the
	// tabs as they were drawn for n, or, the first time, tabs unlike every
	// other step's that stay as they are.
	const tabBar = "420x44+0+0"
	steps := map[int][]byte{}
	known := func(got []byte) int {
		for m, other := range steps {
			if bytes.Equal(got, other) {
				return m
			}
		}
		return 0
	}
	onStep := func(n int, promise string) {
		t.Helper()
		deadline := time.Now().Add(stepWait)
		for {
			got := capture(t, tabBar)
			if want, ok := steps[n]; ok && bytes.Equal(got, want) {
				return
			}
			if _, ok := steps[n]; !ok && known(got) == 0 && bytes.Equal(got, stableCapture(t, tabBar)) {
				steps[n] = got
				return
			}
			if time.Now().After(deadline) {
				if want, ok := steps[n]; ok { // what was compared, kept beside the test's logs
					t.Logf("step %d's tabs as first seen: %s; now: %s", n, saveRGB(t, want, tabBar), saveRGB(t, got, tabBar))
				}
				if m := known(got); m != 0 {
					t.Fatalf("%s: step %d shows after %s, want step %d", promise, m, stepWait, n)
				}
				t.Fatalf("%s: step %d is not shown after %s (a dialog?)", promise, n, stepWait)
			}
			time.Sleep(poll)
		}
	}
	// dialogShown waits (bounded) until a dialog dims step n's tabs.
	dialogShown := func(n int, what string) {
		t.Helper()
		waitFor(t, what, stepWait, func() bool {
			got := capture(t, tabBar)
			return !bytes.Equal(got, steps[n]) && known(got) == 0
		})
	}

	// 1 Image: the control plane is the first role, checked with the factory.
	waitFor(t, "the factory check", 30*time.Second, func() bool { return len(srv.RequestsTo("/versions")) > 0 })
	onStep(1, "start")
	shot("1-image")
	// README: Alt+1…4 switch steps, also while a text field has the focus
	// (Tab, Tab: the Talos version field).
	key("Tab", "Tab")
	key("alt+2")
	onStep(2, "Alt+2 from the version field")
	key("Tab", "Tab", "alt+1")
	onStep(1, "Alt+1 from step 2")
	key("Return")
	// 2 Card: both loop devices, preselected by --device, allowed by --allow-loop.
	onStep(2, "Enter on step 1")
	shot("2-card")
	// README: Enter runs the step's primary button after clicking a card
	// (the list has the focus then). Two clicks on the first row leave the
	// choice as it was.
	// The first card's tick against the second's (both ticked by
	// --device once the list is read): a click unticks it, the next ticks
	// it again.
	const tick1, tick2 = "24x24+2+146", "24x28+2+222" // the second row's tick within a pixel or two (rows fall on fractions)
	same := func() bool {
		a, b := capture(t, tick1), capture(t, tick2)
		row := len(a) / 24
		for off := 0; off+len(a) <= len(b); off += row {
			if bytes.Equal(a, b[off:off+len(a)]) {
				return true
			}
		}
		return false
	}
	// Listed (a tick box is drawn: not the bare background) is ticked:
	// --device preselects in the same update that lists the cards.
	drawn := func() bool { c := capture(t, tick1); return !bytes.Equal(c, bytes.Repeat(c[:3], len(c)/3)) }
	waitFor(t, "both cards ticked by --device", stepWait, func() bool { return drawn() && same() })
	x(t, "mousemove", "--window", win, "300", "165", "click", "1")
	waitFor(t, "the first click to untick the card", stepWait, func() bool { return !same() })
	// Input pacing, not a wait for the app: a second click within Fyne's
	// double-tap delay (300 ms, counted as the app takes the events) is
	// one double tap, not two clicks.
	time.Sleep(700 * time.Millisecond)
	x(t, "click", "1")
	waitFor(t, "the second click to tick it again", stepWait, same)
	key("Return")
	onStep(3, "Enter after clicking a card")
	// 3 Flash: Enter asks, Esc keeps the cards, Enter twice erases and
	// flashes both from one download.
	key("Return")
	dialogShown(3, "the erase confirmation")
	shot("3-confirm")
	key("Escape")
	onStep(3, "Esc on the confirmation")
	for _, dev := range []string{loop, loop2} {
		if got := readDev(t, dev, 512); !bytes.Equal(got, make([]byte, 512)) {
			t.Fatalf("%s was written although the confirmation was dismissed", dev)
		}
	}
	key("Return")
	key("Return")
	// The download bar on its way (its left end filled): the bars move.
	waitFor(t, "the download to start", 60*time.Second, func() bool { return srv.BytesServed() > 0 })
	const barStart = "16x12+112+176"
	empty := capture(t, barStart)
	waitFor(t, "the download bar to fill", stepWait, func() bool { return !bytes.Equal(capture(t, barStart), empty) })
	shotMoving(t, filepath.Join(shots, "4-flashing.png")) // the bars move: not waited still
	for _, dev := range []string{loop, loop2} {
		waitFor(t, dev+" to hold the image", 3*time.Minute, func() bool {
			return bytes.Equal(readDev(t, dev, imageSize), fx.Raw)
		})
	}
	onStep(3, "the flash's end") // no failure dialog over it
	shot("5-done")
	if n := len(srv.RequestsTo("/schematics")); n == 0 {
		t.Error("the schematic was not registered before the download")
	}
	if n := len(srv.RequestsTo(factorytest.ImagePath(cpID, cp.Version(), "metal-arm64.raw.zst"))); n != 1 {
		t.Errorf("%d image downloads for two cards, want one", n)
	}
	cached := filepath.Join(home, ".cache", "talosflash", "images", filepath.FromSlash(imaging.FactoryCacheKey(factoryURL, cpID, cp.Version(), "metal-arm64.raw.zst")))
	if data, err := os.ReadFile(cached); err != nil || !bytes.Equal(data, fx.Zstd(t)) {
		t.Errorf("the image is not in the user's cache at %s: %v", cached, err)
	}

	// 4 Nodes: Enter goes on; the node's address typed goes to the address
	// field, Enter adds it. README: Esc releases the field, then Enter is
	// the step's primary button, "Scan this network", which scans only
	// --subnet and finds the same node.
	key("Return")
	onStep(4, "Enter on the finish screen")
	x(t, "type", "--window", win, "--delay", "40", nd.Addr())
	key("Return")
	waitFor(t, "the typed node to be probed", 20*time.Second, func() bool { return nd.VersionCalls() >= 1 })
	probed := nd.VersionCalls()
	key("Escape")
	key("Return")
	waitFor(t, "Esc, Enter: the scan to probe the node", 30*time.Second, func() bool { return nd.VersionCalls() > probed })
	onStep(4, "the scan's end")
	shot("6-nodes")

	// Its config through "Choose config…" (Tab: the row's first button,
	// Enter). No portal here: the app's chooser opens with the home folder
	// in its path field; the file's name, Enter. Enter then applies it:
	// the incident checks pass (it has Newt's ExtensionServiceConfig).
	key("Tab", "Return")
	dialogShown(4, "the file chooser") // opened in the background: typing before it would go to the address field
	x(t, "type", "--window", win, "--delay", "40", "controlplane.yaml")
	shotTo(shots, "10-chooser", window)
	probed = nd.VersionCalls()
	key("Return")
	waitFor(t, "the checks to probe the node", 30*time.Second, func() bool { return nd.VersionCalls() > probed })
	dialogShown(4, "the apply dialog")
	shot("7-apply")
	key("Return")
	waitFor(t, "the config at the node", 30*time.Second, func() bool { return len(nd.Requests()) == 2 })
	if reqs := nd.Requests(); !reqs[0].DryRun || reqs[1].DryRun || !bytes.Equal(reqs[1].Config, cpConfig) {
		t.Fatalf("the node got %d requests; want its dry run, then controlplane.yaml byte for byte", len(reqs))
	}
	onStep(4, "the apply's end")
	shot("8-applied")
	for _, line := range strings.Split(appLog.String(), "\n") {
		if strings.Contains(line, "Fyne error") {
			t.Errorf("a Fyne error on stderr: %s", line)
		}
	}
	// The window at its minimum size (kept with the test's files only).
	x(t, "windowsize", win, "400", "300")
	shotTo(dir, "min-size", window)
	t.Logf("min-size screenshot: %s", filepath.Join(dir, "min-size.png"))

	for _, s := range []string{"1-image", "2-card", "3-confirm", "4-flashing", "5-done", "6-nodes", "7-apply", "8-applied", "10-chooser"} {
		if st, err := os.Stat(filepath.Join(shots, s+".png")); err != nil || st.Size() < 2000 {
			t.Errorf("screenshot %s missing or empty", s)
		}
	}
	if strings.Contains(appLog.String(), "panic") {
		t.Errorf("the app panicked:\n%s", appLog.String())
	}
}

// throttled serves srv through a proxy on 127.0.0.1 that sends image
// bodies at about 640 KiB/s.
func throttled(t *testing.T, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(r *http.Response) error {
		if strings.HasPrefix(r.Request.URL.Path, "/image/") {
			r.Body = &slowBody{ReadCloser: r.Body}
		}
		return nil
	}
	ts := newLoopbackServer(t, p)
	return ts
}

type slowBody struct{ io.ReadCloser }

func (b *slowBody) Read(p []byte) (int, error) {
	if len(p) > 16<<10 {
		p = p[:16<<10]
	}
	time.Sleep(25 * time.Millisecond) // ~640 KiB/s
	return b.ReadCloser.Read(p)
}

func attachLoop(t *testing.T, file string, size int64) string {
	t.Helper()
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", file).Output()
	if err != nil {
		t.Skipf("cannot attach a loop device: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detach %s: %v %s", dev, err, out)
		}
	})
	return dev
}

func startXvfb(t *testing.T) {
	t.Helper()
	display = xvfbtest.Start(t, "1000x700x24")
	waitFor(t, "Xvfb", 10*time.Second, func() bool {
		cmd := exec.Command("xdotool", "getmouselocation")
		cmd.Env = append(cleanEnv(), "DISPLAY="+display)
		return cmd.Run() == nil
	})
}

// waitWindow waits for the app's window and its first frame; false when
// the app ended first.
func waitWindow(t *testing.T, exited <-chan struct{}) (string, bool) {
	t.Helper()
	var win string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		cmd := exec.Command("xdotool", "search", "--onlyvisible", "--name", "talosflash")
		cmd.Env = append(cleanEnv(), "DISPLAY="+display)
		if out, err := cmd.Output(); err == nil && len(strings.Fields(string(out))) > 0 {
			win = strings.Fields(string(out))[0]
			break
		}
		select {
		case <-exited:
			return "", false
		case <-ctx.Done():
			t.Fatal("timed out after 1m0s waiting for the window")
		case <-time.After(poll):
		}
	}
	waitStable(t, "the window's first frame", "1000x700+0+0")
	return win, true
}

// Bounds of the waits on the screen: generous, for a loaded machine (the
// test failed 2 of 3 runs with fixed pauses while other tests ran).
const (
	stepWait = 60 * time.Second
	poll     = 100 * time.Millisecond
	settle   = 300 * time.Millisecond // a frame unchanged this long is drawn
)

// capture is the screen region (WxH+X+Y) as raw RGB.
func capture(t *testing.T, crop string) []byte {
	t.Helper()
	cmd := exec.Command("import", "-display", display, "-window", "root", "-crop", crop, "+repage", "-strip", "-depth", "8", "RGB:-")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("capture %s: %v", crop, err)
	}
	return out
}

// stableCapture is the region once two captures settle apart agree.
func stableCapture(t *testing.T, crop string) []byte {
	t.Helper()
	prev := capture(t, crop)
	deadline := time.Now().Add(stepWait)
	for {
		time.Sleep(settle)
		got := capture(t, crop)
		if bytes.Equal(got, prev) || time.Now().After(deadline) {
			return got
		}
		prev = got
	}
}

// waitStable waits (bounded) until the region stops changing: the app has
// drawn what it was doing.
func waitStable(t *testing.T, what, crop string) {
	t.Helper()
	stableCapture(t, crop)
}

// saveRGB writes a capture of crop as a PNG in a directory kept after the
// test (for its failure message) and returns its path.
func saveRGB(t *testing.T, rgb []byte, crop string) string {
	t.Helper()
	size, _, _ := strings.Cut(crop, "+")
	f, err := os.CreateTemp("", "talosflash-e2e-*.png")
	if err != nil {
		return err.Error()
	}
	f.Close()
	cmd := exec.Command("convert", "-size", size, "-depth", "8", "rgb:-", f.Name())
	cmd.Stdin = bytes.NewReader(rgb)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Sprintf("%v %s", err, out)
	}
	return f.Name()
}

// shotMoving saves the window as it is (a moving progress bar is never
// still).
func shotMoving(t *testing.T, file string) {
	t.Helper()
	cmd := exec.Command("import", "-display", display, "-window", "root", "-crop", "1000x700+0+0", "+repage",
		"-strip", "-depth", "8", "-colors", "256", "PNG8:"+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("screenshot %s: %v\n%s", file, err, out)
	}
}

// x runs xdotool on the test's display.
func x(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("xdotool", args...)
	cmd.Env = append(cleanEnv(), "DISPLAY="+display)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xdotool %v: %v %s", args, err, out)
	}
}

// readDev reads the first n bytes of dev (bounded).
func readDev(t *testing.T, dev string, n int64) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cleanEnv is the environment without display, proxy and locale settings
// that would reach outside the test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k := strings.ToUpper(kv[:strings.IndexByte(kv, '=')+1])
		switch k {
		case "DISPLAY=", "WAYLAND_DISPLAY=", "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=", "HTTP_PROXY=", "HTTPS_PROXY=", "ALL_PROXY=", "NO_PROXY=", "HOME=", "XDG_CACHE_HOME=", "XDG_CONFIG_HOME=", "LANG=", "LC_ALL=":
			continue
		}
		env = append(env, kv)
	}
	return env
}
