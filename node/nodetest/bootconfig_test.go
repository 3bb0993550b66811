package nodetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// logs collects a fake's Logf lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
}

// apply sends cfg to the fake in mode and waits, bounded, for it to come up
// configured when it should.
func apply(t *testing.T, srv *nodetest.Server, cfg []byte, mode string, dryRun bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := node.Apply(ctx, node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg, Mode: mode, DryRun: dryRun}); err != nil {
		t.Fatalf("apply %s: %v", mode, err)
	}
}

func waitBooted(t *testing.T, srv *nodetest.Server) *nodetest.Node {
	t.Helper()
	select {
	case <-srv.Booted():
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not come up configured")
	}
	n := srv.Node()
	if n == nil {
		t.Fatal("boot ended without a configured node")
	}
	return n
}

func probe(t *testing.T, addr string) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, addr)
	if err != nil {
		t.Fatalf("probe %s: %v", addr, err)
	}
	return n
}

func fastBootstrap(t *testing.T, addr string, tc []byte) (*node.BootstrapResult, error) {
	t.Helper()
	cfg, err := node.ParseTalosconfig(tc, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return node.Bootstrap(ctx, addr, cfg, node.WaitOptions{Timeout: 20 * time.Second, Every: 20 * time.Millisecond})
}

// The generated talosconfig belongs to the generated configs: its CA is
// machine.ca of both, so the fake's server certificate verifies.
func TestFixtureTalosconfigMatchesMachineCA(t *testing.T) {
	tc, cp := string(testkit.Testdata(t, "talos114/valid/talosconfig")), string(testkit.Testdata(t, "talos114/valid/controlplane.yaml"))
	field := func(text, key string) string {
		i := strings.Index(text, key)
		if i < 0 {
			t.Fatalf("no %q", key)
		}
		v, _, _ := strings.Cut(text[i+len(key):], "\n")
		return strings.TrimSpace(v)
	}
	if ca := field(tc, "ca: "); ca == "" || ca != field(cp, "crt: ") {
		t.Fatal("talosconfig's CA is not controlplane.yaml's machine.ca.crt")
	}
}

// A maintenance fake with BootConfig takes the 1.14 control plane config
// (no-reboot, as a real 1.14 node answers), leaves maintenance and serves
// as the configured node of that config: a probe sees a node asking for a
// client certificate, the generated talosconfig connects, Bootstrap works
// once; its version and hostname are kept. The worker config makes a worker
// (certificate from the control plane's CA): Bootstrap refused.
func TestBootConfigComesUpConfigured(t *testing.T) {
	cpCfg, workerCfg, tc := testkit.Testdata(t, "talos114/valid/controlplane.yaml"), testkit.Testdata(t, "talos114/valid/worker.yaml"), testkit.Testdata(t, "talos114/valid/talosconfig")
	var lg logs
	cp := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "cp-1", Logf: lg.logf})
	worker := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "worker-1", Logf: lg.logf})
	if p := probe(t, cp.Addr()); !p.Maintenance || p.Configured {
		t.Fatalf("before apply: %+v", p)
	}

	apply(t, worker, workerCfg, "auto", false) // before the control plane: waits for its CA
	apply(t, cp, cpCfg, "no-reboot", false)
	n := waitBooted(t, cp)
	if n.Addr() != cp.Addr() {
		t.Fatalf("configured at %s, maintenance was at %s", n.Addr(), cp.Addr())
	}
	if p := probe(t, cp.Addr()); !p.Configured || p.Maintenance {
		t.Fatalf("after apply: %+v, want a configured node", p)
	}

	res, err := fastBootstrap(t, cp.Addr(), tc)
	if err != nil || !res.Accepted || res.TalosVersion != nodetest.DefaultVersion {
		t.Fatalf("bootstrap: %+v %v", res, err)
	}
	if _, err := fastBootstrap(t, cp.Addr(), tc); !errors.Is(err, node.ErrAlreadyBootstrapped) {
		t.Fatalf("second bootstrap: %v, want already bootstrapped", err)
	}
	if !n.Bootstrapped() || n.Bootstraps() != 1 {
		t.Fatalf("bootstrapped %v with %d calls, want once", n.Bootstrapped(), n.Bootstraps())
	}

	w := waitBooted(t, worker)
	if p := probe(t, worker.Addr()); !p.Configured {
		t.Fatalf("worker after apply: %+v", p)
	}
	if _, err := fastBootstrap(t, worker.Addr(), tc); !errors.Is(err, node.ErrNotControlPlane) {
		t.Fatalf("worker bootstrap: %v, want refused (not a control plane)", err)
	}
	if w.Bootstrapped() {
		t.Fatal("the worker bootstrapped etcd")
	}

	// Hostname kept (read with the talosconfig, as talosctl would).
	cfg, err := clientconfig.FromBytes(tc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.WithConfig(cfg), client.WithEndpoints(cp.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck
	hn, err := safe.StateGet[*network.HostnameStatus](ctx, c.COSI, network.NewHostnameStatus(network.NamespaceName, network.HostnameID).Metadata())
	if err != nil {
		t.Fatalf("hostname after boot: %v", err)
	}
	if hn.TypedSpec().Hostname != "cp-1" {
		t.Fatalf("hostname %q after boot, want cp-1", hn.TypedSpec().Hostname)
	}

	secrets, err := nodetest.SecretFragments(tc)
	if err != nil {
		t.Fatal(err)
	}
	lg.mu.Lock()
	text := strings.Join(lg.lines, "\n")
	lg.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Fatal("the fake's log holds a fragment of the cluster's secrets")
		}
	}
}

// Dry runs, staged and try applies leave the node in maintenance; so does
// a fake without BootConfig.
func TestBootConfigOnlyForAppliesThatApply(t *testing.T) {
	cpCfg := testkit.Testdata(t, "talos114/valid/controlplane.yaml")
	for _, c := range []struct {
		name   string
		boot   bool
		mode   string
		dryRun bool
	}{
		{"dry run", true, "auto", true},
		{"staged", true, "staged", false},
		{"try", true, "try", false},
		{"without BootConfig", false, "auto", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := nodetest.Start(t, nodetest.Options{BootConfig: c.boot})
			apply(t, srv, cpCfg, c.mode, c.dryRun)
			apply(t, srv, cpCfg, "auto", true) // still answers as maintenance, afterwards too
			if p := probe(t, srv.Addr()); !p.Maintenance || p.Configured || srv.Node() != nil {
				t.Fatalf("after %s: %+v", c.name, p)
			}
			if c.boot { // the same node does boot a config applied now
				apply(t, srv, cpCfg, "reboot", false)
				waitBooted(t, srv)
			}
		})
	}
}

// A config the fake cannot boot (not YAML, here accepted unvalidated)
// leaves it in maintenance, and its log quotes none of it; a worker with no
// control plane of its CA stays down and still closes at once.
func TestBootConfigUnbootable(t *testing.T) {
	var lg logs
	srv := nodetest.Start(t, nodetest.Options{BootConfig: true, SkipValidation: true, Logf: lg.logf})
	apply(t, srv, []byte("machine: {ca: [SECRETSECRETSECRET"), "auto", false)
	if p := probe(t, srv.Addr()); !p.Maintenance || srv.Node() != nil {
		t.Fatalf("after an unbootable config: %+v", p)
	}
	lg.mu.Lock()
	text := strings.Join(lg.lines, "\n")
	lg.mu.Unlock()
	if !strings.Contains(text, "staying in maintenance") || strings.Contains(text, "SECRET") {
		t.Fatalf("log:\n%s", text)
	}

	worker, err := nodetest.New(nodetest.Options{BootConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, worker, testkit.Testdata(t, "talos114/valid/worker.yaml"), "auto", false)
	closed := make(chan struct{})
	go func() { worker.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs while the worker waits for a control plane")
	}
	if worker.Node() != nil {
		t.Fatal("a worker came up without a control plane's CA")
	}
}
