package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// connCounter is a loopback listener standing in for both a node and an
// Image Factory: it only counts the connections it is offered.
type connCounter struct {
	addr string
	n    atomic.Int64
}

func newConnCounter(t *testing.T) *connCounter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &connCounter{addr: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return c
}

// Every usage error is found before any file, node or network is touched:
// exit 2, a message naming the flag and the fix, no connection to the node
// or the factory, and the files named (a talosconfig, a directory, a config,
// a card) never read or created. With --json the error is the last line.
func TestUsageErrorsTouchNothing(t *testing.T) {
	fake := newConnCounter(t)
	factoryURL := "http://" + fake.addr
	dir := t.TempDir()
	missing := func(name string) string { return filepath.Join(dir, "missing", name) } // reading it would fail differently
	cases := []struct {
		args []string
		want []string // in the message
	}{
		{[]string{"upgrade", "--node", fake.addr, "--to", "banana", "--talosconfig", missing("talosconfig"), "--factory", factoryURL},
			[]string{`--to "banana"`, "v1.14.", "talosflash outdated"}},
		{[]string{"upgrade", "--node", fake.addr, "--to", "1.14", "--talosconfig", missing("talosconfig"), "--factory", factoryURL},
			[]string{`--to "1.14"`}},
		{[]string{"upgrade", "--node", "banana:x", "--to", "v1.14.6", "--talosconfig", missing("talosconfig")},
			[]string{"--node", "IP or IP:port"}},
		{[]string{"outdated", missing("repo"), "--to", "v0.1", "--factory", factoryURL},
			[]string{`--to "v0.1"`, "patch, latest or a Talos version"}},
		{[]string{"outdated", "--to", "banana", "--factory", factoryURL, missing("repo")},
			[]string{`--to "banana"`}},
		{[]string{"apply", "--node", fake.addr, "--file", missing("worker.yaml"), "--role", "banana", "--factory", factoryURL},
			[]string{`--role: unknown profile "banana"`, "controlplane, worker", "--profiles"}},
		{[]string{"apply", "--node", fake.addr, "--file", missing("worker.yaml"), "--timeout", "0s"},
			[]string{"--timeout", "positive"}},
		{[]string{"bootstrap", "--node", fake.addr, "--talosconfig", missing("talosconfig"), "--timeout", "-1s"},
			[]string{"--timeout"}},
		{[]string{"flash", "--role", "banana", "--device", missing("card.img"), "--yes", "--factory", factoryURL},
			[]string{`unknown profile "banana"`}},
		{[]string{"flash", "--role", "worker", "--version", "1.14.6", "--device", missing("card.img"), "--yes", "--factory", factoryURL},
			[]string{"--version", "v1.14.5"}},
		{[]string{"flash", "--role", "worker", "--format", "gz", "--device", missing("card.img"), "--yes", "--factory", factoryURL},
			[]string{"--format", "zst or xz"}},
		{[]string{"flash", "--installer", "banana", "--device", missing("card.img"), "--yes", "--factory", factoryURL},
			[]string{"--installer"}},
		{[]string{"apply", "--node", fake.addr, "--file", missing("worker.yaml"), "--flashed-installer", "ghcr.io/x:y:z", "--factory", factoryURL},
			[]string{"--flashed-installer"}},
		{[]string{"apply", "--node", fake.addr, "--file", missing("worker.yaml"), "--profiles", "../../factory/testdata/profiles/not-yaml.yaml", "--factory", factoryURL},
			[]string{"not-yaml.yaml"}},
		{[]string{"schematic", "--role", "worker", "--factory", "factory.talos.dev"},
			[]string{`--factory "factory.talos.dev"`, "https://"}},
		{[]string{"nodes", "--subnet", "127.0.0.1/32", "--factory", "ftp://" + fake.addr},
			[]string{"--factory"}},
	}
	for _, c := range cases {
		for _, jsonOut := range []bool{false, true} {
			args := c.args
			if jsonOut {
				args = append(append([]string{}, args...), "--json")
			}
			code, stdout, stderr := cliRun(t, args...)
			name := strings.Join(args, " ")
			if code != contract.ExitUsage {
				t.Errorf("%s: exit %d, want %d\n%s", name, code, contract.ExitUsage, stderr)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s: message lacks %q: %s", name, w, stderr)
				}
			}
			if strings.Contains(stderr, "vbanana") {
				t.Errorf("%s: the input was rewritten: %s", name, stderr)
			}
			if jsonOut {
				evs := jsonLines(t, name, stdout)
				if last := evs[len(evs)-1]; last["event"] != contract.TypeError || last["code"] != float64(contract.ExitUsage) {
					t.Errorf("%s: last JSON line %v", name, last)
				}
			}
		}
	}
	if n := fake.n.Load(); n != 0 {
		t.Fatalf("%d connections to the node/factory for usage errors", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a named file was created")
	}
	// The counter does count: a valid command that reaches it is seen.
	code, _, _ := cliRun(t, "apply", "--node", fake.addr, "--file", testkit.TestdataPath(t, "worker.yaml"), "--timeout", "2s")
	if code == contract.ExitOK || code == contract.ExitUsage || fake.n.Load() == 0 {
		t.Fatalf("a valid apply: exit %d, %d connections", code, fake.n.Load())
	}
}

// The confirmation takes the device's name, as shown, or its path, as
// typed after --device; anything else writes nothing.
func TestConfirmationAcceptsNameOrPath(t *testing.T) {
	stdinIsTerminal = func(any) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = isTerminal })
	dev := "/dev/loop1"
	for _, typed := range []string{"loop1", "/dev/loop1", "  /dev/loop1 "} {
		var out strings.Builder
		if err := confirmDevice(context.Background(), strings.NewReader(typed+"\n"), &out, dev, "loop"); err != nil {
			t.Errorf("typed %q: %v", typed, err)
		}
		if !strings.Contains(out.String(), `Type "loop1" (or /dev/loop1)`) {
			t.Errorf("prompt %q", out.String())
		}
	}
	for _, typed := range []string{"loop", "/dev/loop2", "dev/loop1", "yes", ""} {
		err := confirmDevice(context.Background(), strings.NewReader(typed+"\n"), &strings.Builder{}, dev, "loop")
		if err == nil || exitCode(err) != contract.ExitUsage {
			t.Errorf("typed %q: %v, want a usage error", typed, err)
		}
	}
}

// devices --allow-loop judges a loop device as flash --allow-loop does:
// safe (without it: refused, naming the flag).
func TestDevicesAllowLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaching a loop device needs root")
	}
	loop := imagetest.LoopDevice(t, 64<<20, false)
	verdict := func(args ...string) diskJSON {
		t.Helper()
		code, stdout, stderr := cliRun(t, append([]string{"devices", "--json"}, args...)...)
		if code != contract.ExitOK {
			t.Fatalf("devices %v: exit %d: %s", args, code, stderr)
		}
		var list []diskJSON
		if err := json.Unmarshal(answer(t, stdout, contract.TypeDevices), &list); err != nil {
			t.Fatal(err)
		}
		for _, d := range list {
			if d.Path == loop {
				return d
			}
		}
		t.Fatalf("%s not listed", loop)
		return diskJSON{}
	}
	if d := verdict(); d.Safe || d.Refusal == nil || !strings.Contains(d.Refusal.Message, "--allow-loop") {
		t.Fatalf("without --allow-loop: %+v", d)
	}
	if d := verdict("--allow-loop"); !d.Safe || d.Refusal != nil {
		t.Fatalf("with --allow-loop: safe %v, refusal %+v", d.Safe, d.Refusal)
	}
	code, stdout, _ := cliRun(t, "devices", "--allow-loop")
	if code != contract.ExitOK || !strings.Contains(stdout, loop) {
		t.Fatalf("devices --allow-loop: exit %d\n%s", code, stdout)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, loop+" ") && !strings.HasSuffix(strings.TrimSpace(line), "ok") {
			t.Fatalf("table: %q", line)
		}
	}
}
