package node

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/node/nodetest"
)

// An installer pulled but gone from the containerd store when
// LifecycleService.Upgrade looks for it: Talos answers gRPC Internal
// "upgrade failed: installer image ... not found in containerd store"
// before any installer runs (internal/app/lifecycle/lifecycle.go). The
// upgrade fails as such: nothing installed, no reboot, the phase "pulled".
func TestUpgradeInstallerNotInContainerdStore(t *testing.T) {
	e := newUpgradeEnv(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: e.cp.Schematic(), Bootstrapped: true, LosePulls: true})
	var log progressLog
	res, err := Upgrade(context.Background(), n.Addr(), e.tc, e.opts(&log))
	if !errors.Is(err, ErrUpgradeFailed) || !strings.Contains(err.Error(), "no installer image") || n.Reboots() != 0 {
		t.Fatalf("err %v, reboots %d", err, n.Reboots())
	}
	if res == nil || res.Phase != PhasePulled || res.InstallerRun || !strings.Contains(res.State(), "it is not installed and the node was not rebooted") {
		t.Fatalf("result %+v: %s", res, res.State())
	}
	if len(n.Upgrades()) != 1 || len(n.Pulled()) != 1 {
		t.Fatalf("pulls %v, upgrades %v", n.Pulled(), n.Upgrades())
	}
}
