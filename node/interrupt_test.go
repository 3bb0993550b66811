package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/node/nodetest"
)

// cancelOn cancels ctx (once) when a progress line contains any of marks:
// the interruption lands at a known step, without timing.
func cancelOn(ctx context.Context, log *progressLog, marks ...string) (context.Context, func(string)) {
	ctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	return ctx, func(s string) {
		log.add(s)
		for _, m := range marks {
			if strings.Contains(s, m) {
				once.Do(cancel)
			}
		}
	}
}

// Ctrl-C at each step of an upgrade says what was sent and what state the
// node is in, and the result's fields agree with what the node received.
func TestUpgradeInterruptedSaysWhatWasSent(t *testing.T) {
	for _, c := range []struct {
		name    string
		legacy  bool
		marks   []string
		pulls   int // the node received (at most, for pulls: a pull may be cut)
		upgrade int
		reboots int
		phases  []string // acceptable phases (a cancel races the stream's end)
		want    []string // in the error
	}{
		{"before anything is sent", false, []string{"waiting until the node is healthy before its upgrade"}, 0, 0, 0,
			[]string{PhaseNothingSent}, []string{"nothing was sent", "still runs v1.14.5"}},
		{"while pulling the installer", false, []string{"pulled "}, 1, 0, 0,
			[]string{PhasePullSent, PhasePulled}, []string{"installer", "not installed", "not rebooted", "still runs v1.14.5"}},
		{"while the installer runs", false, []string{"installer: running installer"}, 1, 1, 0,
			[]string{PhaseInstallerSent, PhaseInstalled}, []string{"installer", "not rebooted", "runs v1.14.5 until its next reboot"}},
		{"before the reboot", false, []string{"rebooting into the new installation"}, 1, 1, 0,
			[]string{PhaseInstalled}, []string{"the installer ran", "not rebooted", "runs v1.14.5 until its next reboot"}},
		{"after the reboot was sent", false, []string{"waiting for the reboot", "rebooting (API not answering)", "boot ID changed"}, 1, 1, 1,
			[]string{PhaseRebootRequested, PhaseRebooted}, []string{"reboot"}},
		{"waiting for the node to be ready", false, []string{"rebooted; waiting for it to be ready"}, 1, 1, 1,
			[]string{PhaseRebooted}, []string{"rebooted", "not waited"}},
		{"legacy: after MachineService.Upgrade", true, []string{"waiting for the reboot", "rebooting (API not answering)", "boot ID changed"}, 0, 1, 0,
			[]string{PhaseRebootRequested, PhaseRebooted}, []string{"MachineService.Upgrade", "reboot"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newUpgradeEnv(t)
			opts := nodetest.NodeOptions{PKI: e.pki, Schematic: e.cp.Schematic(), Bootstrapped: true}
			to := "v1.14.6"
			if c.legacy {
				opts.TalosVersion, to = "v1.12.6", "v1.13.0"
			}
			n := nodetest.StartNode(t, opts)
			var log progressLog
			uo := e.opts(&log)
			uo.To = to
			ctx, progress := cancelOn(context.Background(), &log, c.marks...)
			uo.Wait.Progress = progress
			res, err := Upgrade(ctx, n.Addr(), e.tc, uo)
			var ie *InterruptedError
			if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want an InterruptedError\n%s", err, log.text())
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q: %s", w, msg)
				}
			}
			if strings.Contains(msg, "did not reboot") {
				t.Errorf("error says the node did not reboot: %s", msg)
			}
			pulls, ups := len(n.Pulled()), len(n.Upgrades())
			if c.legacy {
				ups = n.LegacyUpgrades()
			}
			if pulls > c.pulls || c.pulls > 0 && c.name != "while pulling the installer" && pulls != c.pulls || ups != c.upgrade || n.RebootRequests() != c.reboots {
				t.Errorf("node got %d pulls, %d upgrades, %d reboot requests; want %d, %d, %d\n%s", pulls, ups, n.RebootRequests(), c.pulls, c.upgrade, c.reboots, log.text())
			}
			if res == nil || !strings.Contains(strings.Join(c.phases, " "), res.Phase) || res.Phase == "" {
				t.Fatalf("phase %q, want one of %v", res.Phase, c.phases)
			}
			if res.RebootRequested != (n.RebootRequests() > 0 || c.legacy && ups > 0) {
				t.Errorf("RebootRequested %v with %d reboot requests", res.RebootRequested, n.RebootRequests())
			}
			if res.InstallerPulled && pulls == 0 || res.InstallerRun && ups == 0 {
				t.Errorf("result %+v claims more than the node got", res)
			}
		})
	}
}

// Ctrl-C during a bootstrap says whether the request was sent and answered.
func TestBootstrapInterruptedSaysWhatWasSent(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     nodetest.NodeOptions
		marks    []string
		sent     bool
		accepted bool
		want     []string
	}{
		{"waiting for the API", nodetest.NodeOptions{}, []string{"waiting for the Talos API"}, false, false,
			[]string{"nothing was sent", "not bootstrapped"}},
		{"refused as not ready yet", nodetest.NodeOptions{NotReady: 100}, []string{"node not ready for bootstrap yet"}, true, false,
			[]string{"refused as not ready", "not bootstrapped"}},
		{"answer lost", nodetest.NodeOptions{LostAnswer: true}, []string{"node not ready for bootstrap yet"}, true, false,
			[]string{"may have", "do not bootstrap"}},
		{"accepted, waiting for etcd", nodetest.NodeOptions{UnhealthyPolls: 100}, []string{"bootstrap accepted"}, true, true,
			[]string{"accepted", "etcd", "not waited"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pki := newPKI(t)
			c.opts.PKI = pki
			n := nodetest.StartNode(t, c.opts)
			tc, _ := loadTC(t, pki, "os:admin")
			var log progressLog
			ctx, progress := cancelOn(context.Background(), &log, c.marks...)
			w := fastWait(&log)
			w.Progress = progress
			res, err := Bootstrap(ctx, n.Addr(), tc, w)
			var ie *InterruptedError
			if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want an InterruptedError\n%s", err, log.text())
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
			if strings.Contains(err.Error(), "gave up after") {
				t.Errorf("a Ctrl-C is not a timeout: %v", err)
			}
			if (n.Bootstraps() > 0) != c.sent || res == nil || res.Accepted != c.accepted || (res.Attempts > 0) != c.sent {
				t.Errorf("node got %d bootstraps; result %+v", n.Bootstraps(), res)
			}
		})
	}
}
