package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/node/nodetest"
)

// fastWait polls quickly; the fakes answer at once, so only the number of
// attempts (not time) decides the outcomes.
func fastWait(lines *progressLog) WaitOptions {
	return WaitOptions{Timeout: 20 * time.Second, CallTimeout: 5 * time.Second, Every: 5 * time.Millisecond, Progress: lines.add}
}

type progressLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) add(s string) { p.mu.Lock(); p.lines = append(p.lines, s); p.mu.Unlock() }
func (p *progressLog) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// writeTalosconfig writes a talosconfig for pki with role and returns its
// path and its raw bytes (the secrets to look for in outputs).
func writeTalosconfig(t *testing.T, pki *nodetest.PKI, role string) (string, []byte) {
	t.Helper()
	data, err := pki.Talosconfig("home", role, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "talosconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, data
}

func loadTC(t *testing.T, pki *nodetest.PKI, role string) (*Talosconfig, []byte) {
	t.Helper()
	p, data := writeTalosconfig(t, pki, role)
	tc, err := LoadTalosconfig(p, "")
	if err != nil {
		t.Fatal(err)
	}
	return tc, data
}

func newPKI(t *testing.T) *nodetest.PKI {
	t.Helper()
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	return pki
}

func TestBootstrapWaitsThenBootstrapsOnce(t *testing.T) {
	pki := newPKI(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, NotReady: 2, UnhealthyPolls: 3})
	tc, secret := loadTC(t, pki, "os:admin")
	var log progressLog
	res, err := Bootstrap(context.Background(), n.Addr(), tc, fastWait(&log))
	if err != nil {
		t.Fatalf("Bootstrap: %v\n%s", err, log.text())
	}
	if !n.Bootstrapped() || n.Bootstraps() != 3 || res.Attempts != 3 || !res.EtcdHealthy || res.TalosVersion != "v1.14.5" {
		t.Fatalf("node bootstrapped=%v calls=%d, result %+v", n.Bootstrapped(), n.Bootstraps(), res)
	}
	for _, want := range []string{"waiting for the Talos API", "stage running", "bootstrap is not available yet", "etcd Running, unhealthy", "etcd is running and healthy"} {
		if !strings.Contains(log.text(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.text())
		}
	}
	assertNoSecret(t, secret, log.text())

	// A second bootstrap is refused before anything is sent.
	_, err = Bootstrap(context.Background(), n.Addr(), tc, fastWait(&log))
	if !errors.Is(err, ErrAlreadyBootstrapped) || !errors.Is(err, ErrRefused) {
		t.Fatalf("second bootstrap: %v", err)
	}
	if n.Bootstraps() != 3 {
		t.Fatalf("second bootstrap sent a call: %d calls", n.Bootstraps())
	}
}

// The first call's answer is lost after the node bootstrapped: the retry's
// AlreadyExists is our own bootstrap, not a refusal.
func TestBootstrapAnswerLost(t *testing.T) {
	pki := newPKI(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, LostAnswer: true})
	tc, _ := loadTC(t, pki, "os:admin")
	var log progressLog
	res, err := Bootstrap(context.Background(), n.Addr(), tc, fastWait(&log))
	if err != nil || n.Bootstraps() != 2 || res.Attempts != 2 || !res.EtcdHealthy {
		t.Fatalf("err %v, calls %d, result %+v\n%s", err, n.Bootstraps(), res, log.text())
	}
	if !strings.Contains(log.text(), "taking it as bootstrapped") {
		t.Fatalf("progress:\n%s", log.text())
	}
}

func TestBootstrapRefusals(t *testing.T) {
	pki := newPKI(t)
	tc, secret := loadTC(t, pki, "os:admin")
	t.Run("etcd has data", func(t *testing.T) {
		// etcd not running yet but its data directory is not empty: the node's own AlreadyExists.
		n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
		var log progressLog
		if _, err := Bootstrap(context.Background(), n.Addr(), tc, fastWait(&log)); err != nil {
			t.Fatal(err)
		}
		n2 := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Bootstrapped: true})
		_, err := Bootstrap(context.Background(), n2.Addr(), tc, fastWait(&log))
		if !errors.Is(err, ErrAlreadyBootstrapped) || n2.Bootstraps() != 0 {
			t.Fatalf("err %v, calls %d", err, n2.Bootstraps())
		}
		assertNoSecret(t, secret, err.Error()+log.text())
	})
	t.Run("worker", func(t *testing.T) {
		n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true})
		var log progressLog
		_, err := Bootstrap(context.Background(), n.Addr(), tc, fastWait(&log))
		if !errors.Is(err, ErrNotControlPlane) || !strings.Contains(err.Error(), "only available on control plane nodes") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("reader role", func(t *testing.T) {
		n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
		rtc, _ := loadTC(t, pki, "os:reader")
		var log progressLog
		_, err := Bootstrap(context.Background(), n.Addr(), rtc, fastWait(&log))
		var re *RefusedError
		if !errors.As(err, &re) || re.Op != "bootstrap" || n.Bootstrapped() {
			t.Fatalf("err %v", err)
		}
	})
	// A wait that never succeeds is ended by the test as soon as the
	// expected reason shows (no timing in the outcome).
	waitFor := func(t *testing.T, addr string, tc *Talosconfig, reason string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var log progressLog
		w := fastWait(&log)
		w.Timeout = time.Minute
		w.Progress = func(s string) {
			log.add(s)
			if strings.Contains(s, reason) {
				cancel()
			}
		}
		_, err := Bootstrap(ctx, addr, tc, w)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want the wait to go on\n%s", err, log.text())
		}
		return log.text(), err
	}
	t.Run("another cluster's talosconfig", func(t *testing.T) {
		n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
		other, osecret := loadTC(t, newPKI(t), "os:admin")
		text, err := waitFor(t, n.Addr(), other, "not signed by the talosconfig's CA")
		if n.Bootstraps() != 0 {
			t.Fatalf("%d calls", n.Bootstraps())
		}
		assertNoSecret(t, osecret, err.Error()+text)
	})
	t.Run("maintenance node", func(t *testing.T) {
		// Still in maintenance mode (self-signed certificate): the wait goes on.
		m := nodetest.Start(t, nodetest.Options{})
		waitFor(t, m.Addr(), tc, "API not answering")
	})
}

// assertNoSecret fails if any 12-character run of the talosconfig's
// base64 values (CA, certificate, key) or their decoded PEM shows in out.
func assertNoSecret(t *testing.T, talosconfig []byte, out string) {
	t.Helper()
	for _, frag := range secretFragments(t, talosconfig) {
		if strings.Contains(out, frag) {
			t.Fatalf("output contains talosconfig material %q:\n%s", frag, out)
		}
	}
}

func secretFragments(t *testing.T, talosconfig []byte) []string {
	t.Helper()
	frags, err := nodetest.SecretFragments(talosconfig)
	if err != nil {
		t.Fatal(err)
	}
	return frags
}
