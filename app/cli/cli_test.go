package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

const imageSize = 8 << 20

// One generated image serves every test: compressing it is the slow part.
var (
	fixtureOnce sync.Once
	fixture     *imagetest.Fixture
)

// cliRun runs the CLI in-process and returns exit code, stdout, stderr.
func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// fakeFactory serves the worker and controlplane images at DefaultTalosVersion.
func fakeFactory(t *testing.T) (*factorytest.Server, *imagetest.Fixture) {
	t.Helper()
	srv := factorytest.New(t)
	fixtureOnce.Do(func() { fixture = imagetest.New(t, imageSize, 7, 1<<20) })
	fx := fixture
	if fx == nil {
		t.Fatal("image fixture failed")
	}
	for _, p := range factory.BuiltinProfiles() {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", fx.XZ)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", fx.Zstd(t))
	}
	return srv, fx
}

func jsonEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q", sc.Text())
		}
		evs = append(evs, m)
	}
	return evs
}

func lastEvent(evs []map[string]any, name string) map[string]any {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i]["event"] == name {
			return evs[i]
		}
	}
	return nil
}

func TestFlashRoleToFileThenFromCache(t *testing.T) {
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	target := filepath.Join(dir, "card.img")

	code, stdout, stderr := cliRun(t, "--flash", "--role", "worker", "--device", target, "--yes", "--create-file", "--json",
		"--factory", srv.URL, "--cache-dir", cache)
	if code != contract.ExitOK {
		t.Fatalf("exit %d, stderr: %s\nstdout: %s", code, stderr, stdout)
	}
	if got := imagetest.FileSHA256(t, target, imageSize); got != fx.SHA256 {
		t.Fatalf("target sha256 %s, want image %s", got, fx.SHA256)
	}
	evs := jsonEvents(t, stdout)
	res := lastEvent(evs, "result")
	if res == nil || res["verified"] != true || res["sha256"] != fx.SHA256 {
		t.Fatalf("result event %v, want verified with sha %s", res, fx.SHA256)
	}
	workerID, _ := factory.BuiltinProfiles()[1].SchematicID()
	if res["schematic"] != workerID {
		t.Fatalf("flashed schematic %v, want worker %s", res["schematic"], workerID)
	}
	if got := srv.Schematics(); len(got) != 1 || got[0] != workerID {
		t.Fatalf("factory registered %v, want only the worker schematic", got)
	}
	var sawWrite, sawVerify bool
	for _, e := range evs {
		if e["event"] == "progress" && e["stage"] == "write" {
			sawWrite = true
		}
		if e["event"] == "progress" && e["stage"] == "verify" && e["done"] == e["total"] {
			sawVerify = true
		}
	}
	if !sawWrite || !sawVerify {
		t.Fatalf("progress events lack write or a complete verify: %v", evs)
	}

	// The second and third cards come from the cache: no image bytes served.
	served := srv.BytesServed()
	if served < int64(len(fx.XZ)) {
		t.Fatalf("served %d bytes, image is %d", served, len(fx.XZ))
	}
	target2 := filepath.Join(dir, "card2.img")
	code, _, stderr = cliRun(t, "--flash", "--role", "worker", "--device", target2, "--yes", "--create-file",
		"--factory", srv.URL, "--cache-dir", cache)
	if code != contract.ExitOK {
		t.Fatalf("second flash exit %d: %s", code, stderr)
	}
	if srv.BytesServed() != served {
		t.Fatalf("second flash downloaded %d more bytes; want the cache", srv.BytesServed()-served)
	}
	if got := imagetest.FileSHA256(t, target2, imageSize); got != fx.SHA256 {
		t.Fatal("second card differs from the image")
	}
}

func TestFlashControlplaneWarnsAboutNewt(t *testing.T) {
	srv, _ := fakeFactory(t)
	dir := t.TempDir()
	code, stdout, stderr := cliRun(t, "--flash", "--role", "controlplane", "--device", filepath.Join(dir, "cp.img"),
		"--yes", "--create-file", "--json", "--factory", srv.URL, "--cache-dir", dir)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	w := lastEvent(jsonEvents(t, stdout), "warning")
	if w == nil || !strings.Contains(w["message"].(string), "ExtensionServiceConfig") {
		t.Fatalf("want a Newt ExtensionServiceConfig warning, got %v", w)
	}
}

func TestFlashInstallerRefAndFile(t *testing.T) {
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	workerID, _ := factory.BuiltinProfiles()[1].SchematicID()
	ref := "factory.talos.dev/metal-installer/" + workerID + ":" + factory.DefaultTalosVersion

	target := filepath.Join(dir, "a.img")
	code, _, stderr := cliRun(t, "--flash", "--installer", ref, "--device", target, "--yes", "--create-file",
		"--factory", srv.URL, "--cache-dir", dir)
	if code != contract.ExitOK {
		t.Fatalf("installer ref: exit %d: %s", code, stderr)
	}
	if imagetest.FileSHA256(t, target, imageSize) != fx.SHA256 {
		t.Fatal("installer ref flash: wrong bytes")
	}

	inst := filepath.Join(dir, "installer-worker.yaml")
	os.WriteFile(inst, []byte("machine:\n  install:\n    image: "+ref+"\n"), 0o644)
	target = filepath.Join(dir, "b.img")
	code, _, stderr = cliRun(t, "--flash", "--installer-file", inst, "--device", target, "--yes", "--create-file",
		"--factory", srv.URL, "--cache-dir", dir)
	if code != contract.ExitOK {
		t.Fatalf("installer file: exit %d: %s", code, stderr)
	}
	if imagetest.FileSHA256(t, target, imageSize) != fx.SHA256 {
		t.Fatal("installer file flash: wrong bytes")
	}
}

func TestFlashLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	loop := imagetest.LoopDevice(t, 16<<20, false)

	// A loop device is refused unless named explicitly for testing.
	code, _, stderr := cliRun(t, "--flash", "--role", "worker", "--device", loop, "--yes",
		"--factory", srv.URL, "--cache-dir", dir)
	if code != contract.ExitDevice || !strings.Contains(stderr, "--allow-loop") {
		t.Fatalf("loop without --allow-loop: exit %d, want %d and the flag named: %s", code, contract.ExitDevice, stderr)
	}
	if srv.BytesServed() != 0 {
		t.Fatal("a refused device must be refused before downloading")
	}

	code, stdout, stderr := cliRun(t, "--flash", "--role", "worker", "--device", loop, "--yes", "--allow-loop", "--json",
		"--factory", srv.URL, "--cache-dir", dir)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := imagetest.FileSHA256(t, loop, imageSize); got != fx.SHA256 {
		t.Fatalf("loop device holds %s, want %s", got, fx.SHA256)
	}
	if res := lastEvent(jsonEvents(t, stdout), "result"); res["verified"] != true {
		t.Fatalf("result %v", res)
	}
}

func TestExitCodes(t *testing.T) {
	srv, _ := fakeFactory(t)
	dir := t.TempDir()
	notXZ := filepath.Join(dir, "garbage.raw.xz")
	os.WriteFile(notXZ, append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, bytes.Repeat([]byte{1}, 4096)...), 0o644)
	card := filepath.Join(dir, "card.img")
	badProfiles := filepath.Join(dir, "profiles.yaml")
	os.WriteFile(badProfiles, []byte("profiles:\n  - name: edge\n    extension: [siderolabs/newt]\n"), 0o644)
	common := []string{"--factory", srv.URL, "--cache-dir", dir}
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", nil, contract.ExitUsage, "no command"},
		{"unknown command", []string{"frobnicate"}, contract.ExitUsage, "unknown command"},
		{"bad flag", []string{"--flash", "--colour"}, contract.ExitUsage, "unknown flag --colour"},
		{"no device", []string{"--flash", "--role", "worker"}, contract.ExitUsage, "--device is required"},
		{"unknown role", append([]string{"--flash", "--role", "master", "--device", card, "--yes", "--create-file"}, common...), contract.ExitUsage, `unknown profile "master"`},
		{"bad profile yaml", append([]string{"--flash", "--role", "edge", "--profiles", badProfiles, "--device", card, "--yes", "--create-file"}, common...), contract.ExitUsage, `unknown field "extension"`},
		{"unknown extension", []string{"schematic", "--role", "worker", "--profiles", testkit.WriteFile(t, dir, "p2.yaml", "profiles:\n  - name: worker\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/newtt]\n"), "--register", "--factory", srv.URL}, contract.ExitUsage, "did you mean siderolabs/newt"},
		{"bad version", append([]string{"--flash", "--role", "worker", "--version", "1.x", "--device", card, "--yes", "--create-file"}, common...), contract.ExitUsage, "version"},
		{"two sources", append([]string{"--flash", "--role", "worker", "--image", notXZ, "--device", card, "--yes", "--create-file"}, common...), contract.ExitUsage, "exactly one"},
		{"no tty no yes", append([]string{"--flash", "--role", "worker", "--device", card, "--create-file"}, common...), contract.ExitUsage, "--yes"},
		{"bad installer ref", append([]string{"--flash", "--installer", "ghcr.io/siderolabs/installer:v1.14.5", "--device", card, "--yes", "--create-file"}, common...), contract.ExitUsage, "installer"},
		{"directory device", append([]string{"--flash", "--role", "worker", "--device", dir, "--yes"}, common...), contract.ExitDevice, "directory"},
		{"missing device", append([]string{"--flash", "--role", "worker", "--device", "/dev/talosflash-nope", "--yes"}, common...), contract.ExitUsage, "talosflash-nope does not exist"},
		{"system disk", append([]string{"--flash", "--role", "worker", "--device", rootDisk(t), "--yes"}, common...), contract.ExitDevice, "refusing"},
		{"factory down", []string{"--flash", "--role", "worker", "--device", card, "--yes", "--create-file", "--factory", "http://127.0.0.1:1", "--cache-dir", dir}, contract.ExitNetwork, "127.0.0.1:1"},
		{"unknown version on factory", append([]string{"--flash", "--role", "worker", "--version", "v1.99.0", "--device", card, "--yes", "--create-file"}, common...), contract.ExitUsage, "v1.99.0"},
		{"corrupt image", []string{"--flash", "--image", notXZ, "--device", card, "--yes", "--create-file"}, contract.ExitImage, "xz"},
		{"apply no file", []string{"apply", "--node", "127.0.0.1"}, contract.ExitUsage, "--file"},
		{"apply bad mode", []string{"apply", "--node", "127.0.0.1", "--file", notXZ, "--mode", "sometimes"}, contract.ExitUsage, "mode"},
		{"apply not a config", []string{"apply", "--node", "127.0.0.1", "--file", notXZ}, contract.ExitConfig, "config"},
		{"apply huge config", []string{"apply", "--node", "127.0.0.1", "--file", testkit.WriteFile(t, dir, "huge.yaml", strings.Repeat("# padding\n", 500000))}, contract.ExitConfig, "too large"},
		{"apply directory config", []string{"apply", "--node", "127.0.0.1", "--file", dir}, contract.ExitUsage, "directory"},
		{"nodes bad subnet", []string{"nodes", "--subnet", "10.0.0.0/99"}, contract.ExitUsage, "subnet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := cliRun(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, stderr)
			}
			if !strings.Contains(stderr, c.msg) {
				t.Fatalf("stderr %q lacks %q", stderr, c.msg)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Fatalf("stack trace on bad input: %s", stderr)
			}
			if lines := strings.Count(strings.TrimSpace(lastLine(stderr)), "\n"); lines != 0 {
				t.Fatalf("error is not one line: %q", stderr)
			}
		})
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// rootDisk is the whole disk holding / (from /proc/self/mountinfo via lsblk).
func rootDisk(t *testing.T) string {
	out, err := exec.Command("findmnt", "-n", "-o", "SOURCE", "/").Output()
	if err != nil {
		t.Skipf("findmnt: %v", err)
	}
	src := strings.TrimSpace(string(out))
	pk, err := exec.Command("lsblk", "-n", "-o", "PKNAME", src).Output()
	if err == nil && strings.TrimSpace(string(pk)) != "" {
		return "/dev/" + strings.TrimSpace(string(pk))
	}
	if !strings.HasPrefix(src, "/dev/") {
		t.Skipf("root filesystem %q is not on a block device", src)
	}
	return src
}

func TestApplyConfig(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{})
	dir := t.TempDir()
	worker := testkit.Testdata(t, "worker.yaml")
	file := filepath.Join(dir, "worker.yaml")
	os.WriteFile(file, worker, 0o600)

	code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", file, "--role", "worker", "--dry-run")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Config, worker) || !reqs[0].DryRun {
		t.Fatalf("server got %d requests; want the exact worker.yaml as a dry run", len(reqs))
	}
	if !strings.Contains(stdout, "dry run") {
		t.Fatalf("stdout %q", stdout)
	}

	// The incident: a node flashed as controlplane (Newt inside) gets a config
	// without the newt ExtensionServiceConfig -> refused before sending.
	code, _, stderr = cliRun(t, "apply", "--node", srv.Addr(), "--file", file, "--role", "controlplane")
	if code != contract.ExitConfig {
		t.Fatalf("newt without ESC: exit %d, want %d: %s", code, contract.ExitConfig, stderr)
	}
	if !strings.Contains(stderr, "newt") {
		t.Fatalf("stderr lacks the newt finding: %s", stderr)
	}
	if len(srv.Requests()) != 1 {
		t.Fatal("a config failing the incident check was sent")
	}

	// Nothing listens: a network error.
	code, _, stderr = cliRun(t, "apply", "--node", "127.0.0.1:1", "--file", file, "--role", "worker")
	if code != contract.ExitNetwork {
		t.Fatalf("closed port: exit %d, want %d: %s", code, contract.ExitNetwork, stderr)
	}
}

func TestNodesFindsTestServer(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.1:0"})
	port := srv.Port()
	code, stdout, stderr := cliRun(t, "nodes", "--subnet", "127.0.0.1/32", "--port", strconv.Itoa(port), "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var nodes []map[string]any
	if err := json.Unmarshal(answer(t, stdout, "nodes"), &nodes); err != nil {
		t.Fatalf("bad JSON %q: %v", stdout, err)
	}
	if len(nodes) != 1 || nodes[0]["maintenance"] != true {
		t.Fatalf("nodes %v; want the one maintenance test server", nodes)
	}
}

// A second card flashes from the cache with the factory gone: no
// registration, no version list, nothing but the cache.
func TestFlashFromCacheWithFactoryDown(t *testing.T) {
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	for i, card := range []string{"card1.img", "card2.img"} {
		if i == 1 {
			srv.Close()
		}
		target := filepath.Join(dir, card)
		code, _, stderr := cliRun(t, "--flash", "--role", "worker", "--device", target, "--yes", "--create-file",
			"--factory", srv.URL, "--cache-dir", cache)
		if code != contract.ExitOK {
			t.Fatalf("%s: exit %d: %s", card, code, stderr)
		}
		if got := imagetest.FileSHA256(t, target, imageSize); got != fx.SHA256 {
			t.Fatalf("%s holds sha256 %s, want %s", card, got, fx.SHA256)
		}
		if i == 1 && !strings.Contains(stderr, "using the cached image") {
			t.Errorf("second flash does not say it used the cache: %s", stderr)
		}
	}
	// And without the cache entry the factory is needed: a network error.
	code, _, stderr := cliRun(t, "--flash", "--role", "controlplane", "--device", filepath.Join(dir, "card3.img"), "--yes", "--create-file",
		"--factory", srv.URL, "--cache-dir", cache)
	if code != contract.ExitNetwork {
		t.Fatalf("uncached image with the factory down: exit %d, want %d: %s", code, contract.ExitNetwork, stderr)
	}
}

// An installer reference of a built-in role is recognised offline: with
// its image cached, a factory that accepts connections and never answers
// is not asked anything (it used to hold the flash for the 30 s API
// timeout looking the schematic up).
func TestFlashInstallerRefOfBuiltinRoleOffline(t *testing.T) {
	srv, fx := fakeFactory(t)
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var silent atomic.Bool
	var asked atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if silent.Load() {
			asked.Add(1)
			<-r.Context().Done() // a factory that never answers
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	code, _, stderr := cliRun(t, "--flash", "--role", "worker", "--device", filepath.Join(dir, "card1.img"), "--yes", "--create-file",
		"--factory", front.URL, "--cache-dir", cache)
	if code != contract.ExitOK {
		t.Fatalf("first card: exit %d: %s", code, stderr)
	}
	silent.Store(true)
	worker, _ := factory.FindProfile(factory.BuiltinProfiles(), "worker")
	id, _ := worker.SchematicID()
	ref := strings.TrimPrefix(front.URL, "http://") + "/metal-installer/" + id + ":" + factory.DefaultTalosVersion
	card2 := filepath.Join(dir, "card2.img")
	code, _, stderr = cliRun(t, "--flash", "--installer", ref, "--device", card2, "--yes", "--create-file",
		"--factory", front.URL, "--cache-dir", cache)
	if code != contract.ExitOK {
		t.Fatalf("second card: exit %d: %s", code, stderr)
	}
	if got := imagetest.FileSHA256(t, card2, imageSize); got != fx.SHA256 {
		t.Fatalf("card2 holds sha256 %s, want %s", got, fx.SHA256)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the silent factory was asked %d times for a cached built-in image", n)
	}
}

// A symlinked directory inside the cache is refused, offline too: exit 10
// naming the path (not "factory unreachable"), nothing behind the link is
// flashed or deleted.
func TestFlashRefusesSymlinkedCacheDirOffline(t *testing.T) {
	_, fx := fakeFactory(t)
	dir := t.TempDir()
	const offline = "http://127.0.0.1:1"
	worker, _ := factory.FindProfile(factory.BuiltinProfiles(), "worker")
	id, _ := worker.SchematicID()
	key := imaging.FactoryCacheKey(offline, id, factory.DefaultTalosVersion, "metal-arm64.raw.xz")
	cache := filepath.Join(dir, "cache")
	versionDir := filepath.Join(cache, filepath.FromSlash(path.Dir(key)))
	if err := os.MkdirAll(filepath.Dir(versionDir), 0o700); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(elsewhere, "metal-arm64.raw.xz")
	if err := os.WriteFile(outside, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, versionDir); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.img")
	code, _, stderr := cliRun(t, "--flash", "--role", "worker", "--device", card, "--yes", "--create-file", "--factory", offline, "--cache-dir", cache)
	if code != contract.ExitStorage || !strings.Contains(stderr, "symbolic link") {
		t.Fatalf("exit %d, want %d naming the link: %s", code, contract.ExitStorage, stderr)
	}
	if _, err := os.Stat(card); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("card written: %v", err)
	}
	if data, err := os.ReadFile(outside); err != nil || !bytes.Equal(data, fx.XZ) {
		t.Fatalf("the file behind the link changed: %v", err)
	}
}
