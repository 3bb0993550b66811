//go:build linux

package secondday

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/internal/testkit"
)

// Addresses of the cluster: apart from the ones other tests use.
var ips = []string{"127.0.0.120", "127.0.0.121", "127.0.0.122"}

const (
	older = "v1.14.4" // the release the cluster starts at
	newer = "v1.14.5" // the next one, which the upgrade goes to
)

// proc is a program the test started, its stderr lines kept.
type proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

// start runs bin until the test ends (SIGINT, then SIGKILL after 10 s).
func start(t *testing.T, dir, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), more: make(chan struct{})}
	p.cmd.Dir = dir
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = p.cmd.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.more)
			p.more = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// waitLine waits, bounded, for a stderr line holding want.
func (p *proc) waitLine(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if strings.Contains(l, want) {
				p.mu.Unlock()
				return l
			}
		}
		more := p.more
		p.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: no line with %q in %s:\n%s", filepath.Base(p.cmd.Path), want, timeout, p.text())
		}
	}
}

func (p *proc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// run runs the CLI to its end (bounded) and returns its exit code and output.
func run(t *testing.T, dir, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader("")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, out.String()
}

func mustRun(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	code, out := run(t, dir, bin, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", filepath.Base(bin), strings.Join(args, " "), code, out)
	}
	return out
}

func edit(t *testing.T, path string, pairs ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(pairs); i += 2 {
		re := regexp.MustCompile(pairs[i])
		if !re.MatchString(s) {
			t.Fatalf("%s: nothing matches %q", path, pairs[i])
		}
		s = re.ReplaceAllString(s, pairs[i+1])
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The whole second day on the fakes, as a user runs it by hand (the
// README's walkthrough and docs/TRY.md's day 2, one release behind): flash the
// three cards of an inventory at the older release, boot a fakenode from
// each, apply with the bootstrap, get the kubeconfig, install the CNI
// (fakenode's SIGUSR1: the Kubernetes nodes turn Ready), then
// `upgrade --inventory` to the next release: each node pulled its role's
// installer, was drained (CoreDNS's pods evicted, as fakenode's API logs
// them), rebooted onto the new version, and every node is back Ready.

func TestSecondDayByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds talosflash, fakefactory and fakenode (-short)")
	}
	root := testkit.Root(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-tags", "nogui", "-o", bin+"/", ".", "./factory/factorytest/fakefactory", "./node/nodetest/fakenode")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tf, fakefactory, fakenode := filepath.Join(bin, "talosflash"), filepath.Join(bin, "fakefactory"), filepath.Join(bin, "fakenode")
	dir := t.TempDir()
	t.Setenv("HOME", dir) // the image cache and any kubeconfig stay here
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, ".cache"))
	t.Setenv("KUBECONFIG", "")

	factoryAddr := "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t, "127.0.0.1"))
	ff := start(t, dir, fakefactory, "--listen", factoryAddr)
	ff.waitLine(t, "ready", 2*time.Minute)
	port := strconv.Itoa(testkit.FreePort(t, ips...))
	kport := strconv.Itoa(testkit.FreePort(t, ips[0]))

	mustRun(t, dir, tf, "inventory", "init")
	inv := filepath.Join(dir, "talosflash.yaml")
	edit(t, inv, `(?m)^cluster: home$`, "cluster: homelab", `(?m)^factory: .*`, "factory: http://"+factoryAddr,
		`192\.168\.1\.1\b`, "127.0.0.1", `192\.168\.1\.2([0-2])`, "127.0.0.12$1", `(?m)^talosVersion: .*`, "talosVersion: "+older)
	talos := filepath.Join(dir, "talos")
	if err := os.MkdirAll(talos, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"controlplane.yaml", "worker.yaml", "talosconfig"} {
		b := testkit.Testdata(t, "talos114/valid/"+f)
		b = bytes.ReplaceAll(b, []byte("https://192.168.1.20:6443"), []byte("https://"+ips[0]+":"+kport))
		if err := os.WriteFile(filepath.Join(talos, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	installers := func(version string) {
		for _, role := range []string{"controlplane", "worker"} {
			out := mustRun(t, dir, tf, "schematic", "--role", role, "--version", version, "--installer-yaml")
			if err := os.WriteFile(filepath.Join(talos, "installer-"+role+".yaml"), []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	installers(older)
	mustRun(t, dir, tf, "inventory", "check")
	flash := []string{"--flash", "--inventory", "talosflash.yaml", "--create-file", "--yes"}
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		flash = append(flash, "--hostname", h, "--device", h+".img")
	}
	// The fake factory serves every profile one release behind too
	// (fakefactory --versions), so the cards hold v1.14.4 as a real
	// cluster one release behind would.
	mustRun(t, dir, tf, flash...)
	nodeArgs := []string{"--port", port}
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		nodeArgs = append(nodeArgs, "--card", h+".img")
	}
	fn := start(t, dir, fakenode, nodeArgs...)
	fn.waitLine(t, "try: talosflash nodes", time.Minute)

	ta := []string{"--inventory", "talosflash.yaml", "--port", port, "--talosconfig", "talos/talosconfig"}
	out := mustRun(t, dir, tf, append([]string{"apply", "--bootstrap", "--wait", "1m", "--interval", "100ms"}, ta...)...)
	for _, w := range []string{"cp-1: bootstrapped etcd (Talos " + older + ")", "worker-2: worker-2 is running; its Kubernetes node is not Ready yet"} {
		if !strings.Contains(out, w) {
			t.Errorf("apply lacks %q:\n%s", w, out)
		}
	}
	mustRun(t, dir, tf, append([]string{"kubeconfig"}, append(ta, "kubeconfig")...)...)
	if err := fn.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	fn.waitLine(t, "CNI installed", 30*time.Second)
	status := append([]string{"status"}, append(ta, "--kubeconfig", "kubeconfig")...)
	out = mustRun(t, dir, tf, status...)
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if !strings.Contains(out, "  "+h+": Ready\n") || !strings.Contains(out, "running, ready · Talos "+older) {
			t.Fatalf("status before the upgrade: %s not Ready on %s:\n%s", h, older, out)
		}
	}

	up := append([]string{"upgrade", "--to", newer, "--kubeconfig", "kubeconfig", "--interval", "100ms", "--timeout", "1m", "--drain-timeout", "30s"}, ta...)
	out = mustRun(t, dir, tf, up...)
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if !strings.Contains(out, h+": upgraded: runs "+newer) {
			t.Errorf("upgrade: %s not upgraded:\n%s", h, out)
		}
	}
	evicted := regexp.MustCompile(`kube-apiserver: evicted kube-system/coredns-[0-9a-f]+@(cp-1|worker-1|worker-2)`).FindAllString(fn.text(), -1)
	if len(evicted) == 0 {
		t.Errorf("no eviction in fakenode's log:\n%s", fn.text())
	}
	out = mustRun(t, dir, tf, status...)
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if !strings.Contains(out, "  "+h+": Ready\n") {
			t.Errorf("status after the upgrade: %s not Ready:\n%s", h, out)
		}
	}
	if n := strings.Count(out, "running, ready · Talos "+newer); n != 3 {
		t.Errorf("%d nodes run %s after the upgrade:\n%s", n, newer, out)
	}
	t.Logf("evictions: %q", evicted)
}
