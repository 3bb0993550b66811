package node

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/node/nodetest"
)

type upgradeEnv struct {
	pki    *nodetest.PKI
	tc     *Talosconfig
	secret []byte
	fac    *factorytest.Server
	client *factory.Client
	cp     factory.Profile
	cpID   string
}

func newUpgradeEnv(t *testing.T) *upgradeEnv {
	t.Helper()
	e := &upgradeEnv{pki: newPKI(t), fac: factorytest.New(t)}
	e.tc, e.secret = loadTC(t, e.pki, "os:admin")
	e.fac.SetVersions("v1.12.6", "v1.13.0", "v1.14.5", "v1.14.6")
	e.client = factory.NewClient(e.fac.URL, e.fac.Client())
	e.cp = factory.BuiltinProfiles()[0]
	var err error
	if e.cpID, err = e.fac.AddSchematic(e.cp.Schematic()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *upgradeEnv) opts(log *progressLog) UpgradeOptions {
	return UpgradeOptions{To: "v1.14.6", Factory: e.client, Wait: fastWait(log)}
}

func TestUpgradeUsesTheNodesOwnInstaller(t *testing.T) {
	e := newUpgradeEnv(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: e.cp.Schematic(), Bootstrapped: true, UnhealthyPolls: 2})
	var log progressLog
	res, err := Upgrade(context.Background(), n.Addr(), e.tc, e.opts(&log))
	if err != nil {
		t.Fatalf("Upgrade: %v\n%s", err, log.text())
	}
	want := e.client.RegistryHost() + "/metal-installer/" + e.cpID + ":v1.14.6"
	if res.Image != want || res.API != "LifecycleService" || res.From != "v1.14.5" || !res.Rebooted || !res.Healthy || res.BootedAfter != e.cpID {
		t.Fatalf("result %+v, want image %s", res, want)
	}
	if res.Digest != factorytest.InstallerDigest("metal-installer", e.cpID, "v1.14.6") {
		t.Fatalf("digest %q", res.Digest)
	}
	// What the node received: the pull and the upgrade of exactly that image, then one reboot.
	if !slices.Equal(n.Pulled(), []string{want}) || !slices.Equal(n.Upgrades(), []string{want}) || n.LegacyUpgrades() != 0 || n.Reboots() != 1 {
		t.Fatalf("node got pulls %v upgrades %v legacy %d reboots %d", n.Pulled(), n.Upgrades(), n.LegacyUpgrades(), n.Reboots())
	}
	if n.RunningVersion() != "v1.14.6" {
		t.Fatalf("node runs %s", n.RunningVersion())
	}
	if len(e.fac.RequestsTo("/v2/metal-installer/"+e.cpID+"/manifests/v1.14.6")) != 1 {
		t.Fatal("the installer was not checked on the factory")
	}
	for _, w := range []string{"rebooting", "kubelet Running unhealthy (starting)", "boot ID changed", "all services healthy"} {
		if !strings.Contains(log.text(), w) {
			t.Errorf("progress lacks %q:\n%s", w, log.text())
		}
	}
	assertNoSecret(t, e.secret, log.text())
}

func TestUpgradeLegacyNode(t *testing.T) {
	e := newUpgradeEnv(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, TalosVersion: "v1.12.6", Schematic: e.cp.Schematic(), Bootstrapped: true})
	var log progressLog
	o := e.opts(&log)
	o.To = "v1.13.0"
	res, err := Upgrade(context.Background(), n.Addr(), e.tc, o)
	if err != nil {
		t.Fatalf("Upgrade: %v\n%s", err, log.text())
	}
	want := e.client.RegistryHost() + "/metal-installer/" + e.cpID + ":v1.13.0"
	if res.API != "MachineService.Upgrade" || n.LegacyUpgrades() != 1 || !slices.Equal(n.Upgrades(), []string{want}) || len(n.Pulled()) != 0 || n.RunningVersion() != "v1.13.0" || !res.Healthy {
		t.Fatalf("result %+v; node upgrades %v legacy %d pulls %v version %s", res, n.Upgrades(), n.LegacyUpgrades(), n.Pulled(), n.RunningVersion())
	}
}

func TestUpgradeRefusesWithoutSending(t *testing.T) {
	e := newUpgradeEnv(t)
	cases := map[string]struct {
		node nodetest.NodeOptions
		to   string
		dry  bool
		want error
		text string
	}{
		"dry run":            {node: nodetest.NodeOptions{Schematic: e.cp.Schematic()}, to: "v1.14.6", dry: true},
		"no schematic":       {node: nodetest.NodeOptions{}, to: "v1.14.6", want: ErrNoSchematic, text: "refusing to guess"},
		"not on the factory": {node: nodetest.NodeOptions{Schematic: e.cp.Schematic()}, to: "v1.14.9", want: factory.ErrInstallerMissing},
		"downgrade":          {node: nodetest.NodeOptions{Schematic: e.cp.Schematic()}, to: "v1.13.0", text: "does not downgrade"},
		"up to date":         {node: nodetest.NodeOptions{Schematic: e.cp.Schematic()}, to: "v1.14.5"},
		"extension dropped":  {node: nodetest.NodeOptions{Schematic: e.cp.Schematic()}, to: "v1.14.6", want: ErrExtensionMissing, text: "siderolabs/newt not offered for v1.14.6"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			c.node.PKI = e.pki
			if name == "extension dropped" {
				var exts []factory.ExtensionInfo
				for _, x := range must(e.client.Extensions(context.Background(), "v1.14.5")) {
					if x.Name != "siderolabs/newt" {
						exts = append(exts, x)
					}
				}
				e.fac.SetExtensions("v1.14.6", exts)
				defer e.fac.SetExtensions("v1.14.6", must(e.client.Extensions(context.Background(), "v1.14.5")))
			}
			n := nodetest.StartNode(t, c.node)
			var log progressLog
			o := e.opts(&log)
			o.To, o.DryRun = c.to, c.dry
			res, err := Upgrade(context.Background(), n.Addr(), e.tc, o)
			switch {
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("err %v, want %v", err, c.want)
			case c.text != "" && (err == nil || !strings.Contains(err.Error(), c.text)):
				t.Fatalf("err %v, want %q", err, c.text)
			case c.want == nil && c.text == "" && err != nil:
				t.Fatal(err)
			}
			if len(n.Upgrades()) != 0 || len(n.Pulled()) != 0 || n.Reboots() != 0 {
				t.Fatalf("sent to the node: upgrades %v pulls %v reboots %d", n.Upgrades(), n.Pulled(), n.Reboots())
			}
			if name == "dry run" && (res.Image != e.client.RegistryHost()+"/metal-installer/"+e.cpID+":v1.14.6" || !res.DryRun) {
				t.Fatalf("dry run plan %+v", res)
			}
			if name == "up to date" && !res.UpToDate {
				t.Fatalf("up to date: %+v", res)
			}
		})
	}
}

// A node that never becomes healthy is not upgraded (the wait is ended by
// the test once the reason shows).
func TestUpgradeWaitsForHealthyNodeFirst(t *testing.T) {
	e := newUpgradeEnv(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: e.cp.Schematic(), Bootstrapped: true, UnhealthyPolls: 1 << 30})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log progressLog
	o := e.opts(&log)
	o.Wait.Progress = func(s string) {
		log.add(s)
		if strings.Contains(s, "waiting for etcd Running unhealthy") {
			cancel()
		}
	}
	_, err := Upgrade(ctx, n.Addr(), e.tc, o)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was sent") || len(n.Pulled()) != 0 || len(n.Upgrades()) != 0 {
		t.Fatalf("err %v, pulls %v upgrades %v\n%s", err, n.Pulled(), n.Upgrades(), log.text())
	}
}

func TestUpgradeInstallerFailureDoesNotReboot(t *testing.T) {
	e := newUpgradeEnv(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: e.cp.Schematic(), UpgradeExitCode: 1, Bootstrapped: true})
	var log progressLog
	_, err := Upgrade(context.Background(), n.Addr(), e.tc, e.opts(&log))
	if !errors.Is(err, ErrUpgradeFailed) || !strings.Contains(err.Error(), "exited with code 1") || n.Reboots() != 0 {
		t.Fatalf("err %v, reboots %d", err, n.Reboots())
	}
}

func TestUpgradeAllOneAtATime(t *testing.T) {
	e := newUpgradeEnv(t)
	wk := factory.BuiltinProfiles()[1]
	wkID, err := e.fac.AddSchematic(wk.Schematic())
	if err != nil {
		t.Fatal(err)
	}
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: e.cp.Schematic(), Bootstrapped: true, UnhealthyPolls: 3})
	w1 := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: wk.Schematic(), Worker: true, UnhealthyPolls: 3})
	w2 := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: wk.Schematic(), Worker: true})
	nodes := []*nodetest.Node{cp, w1, w2}
	var log progressLog
	var done []string
	err = UpgradeAll(context.Background(), []string{cp.Addr(), w1.Addr(), w2.Addr()}, e.tc, e.opts(&log), func(r *UpgradeResult) {
		// When a node reports, it is healthy on the new version and the next one is untouched.
		i := len(done)
		done = append(done, r.Image)
		if !r.Healthy || nodes[i].RunningVersion() != "v1.14.6" {
			t.Errorf("node %d reported before healthy: %+v", i, r)
		}
		if i+1 < len(nodes) && len(nodes[i+1].Upgrades()) != 0 {
			t.Errorf("node %d started before node %d was healthy", i+1, i)
		}
	})
	if err != nil {
		t.Fatalf("UpgradeAll: %v\n%s", err, log.text())
	}
	host := e.client.RegistryHost() + "/metal-installer/"
	want := []string{host + e.cpID + ":v1.14.6", host + wkID + ":v1.14.6", host + wkID + ":v1.14.6"}
	if !slices.Equal(done, want) {
		t.Fatalf("upgraded %v, want %v", done, want)
	}

	// A failure stops the run: the next node is left alone.
	bad := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: wk.Schematic(), UpgradeExitCode: 2, Worker: true})
	next := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: wk.Schematic(), Worker: true})
	err = UpgradeAll(context.Background(), []string{bad.Addr(), next.Addr()}, e.tc, e.opts(&log), nil)
	if !errors.Is(err, ErrUpgradeFailed) || len(next.Upgrades()) != 0 {
		t.Fatalf("err %v, next node got %v", err, next.Upgrades())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A legacy node that answers MachineService.Upgrade with an error started
// no installer: the result says nothing was installed or sent to run (it
// said "installer-sent" before).
func TestUpgradeLegacyRefusedIsNotInstallerSent(t *testing.T) {
	e := newUpgradeEnv(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, TalosVersion: "v1.12.6", Schematic: e.cp.Schematic(), Bootstrapped: true, UpgradeExitCode: 1})
	var log progressLog
	o := e.opts(&log)
	o.To = "v1.13.0"
	res, err := Upgrade(context.Background(), n.Addr(), e.tc, o)
	if err == nil {
		t.Fatal("a refused upgrade succeeded")
	}
	if res.Phase == PhaseInstallerSent || res.InstallerRun || res.RebootRequested || n.LegacyUpgrades() != 1 {
		t.Fatalf("result %+v after the node refused (legacy calls %d)", res, n.LegacyUpgrades())
	}
}

// talosctl v1.14 upgrades a pre-release of 1.13 past alpha.2 with
// LifecycleService (talosUpgradeAPIVersionRange ">1.13.0-alpha.2"); before
// this fix talosflash compared with 1.13.0 and sent the legacy call.
func TestUpgradeAPIOfPreReleases(t *testing.T) {
	e := newUpgradeEnv(t)
	for from, api := range map[string]string{"v1.13.0-beta.1": "LifecycleService", "v1.13.0-alpha.3": "LifecycleService", "v1.13.0-alpha.2": "MachineService.Upgrade"} {
		t.Run(from, func(t *testing.T) {
			n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, TalosVersion: from, Schematic: e.cp.Schematic(), Bootstrapped: true})
			var log progressLog
			o := e.opts(&log)
			o.To = "v1.13.0"
			res, err := Upgrade(context.Background(), n.Addr(), e.tc, o)
			if err != nil {
				t.Fatalf("Upgrade: %v\n%s", err, log.text())
			}
			legacy := 0
			if api == "MachineService.Upgrade" {
				legacy = 1
			}
			if res.API != api || n.LegacyUpgrades() != legacy || n.RunningVersion() != "v1.13.0" || !res.Healthy || UsesLifecycleService(from) != (legacy == 0) {
				t.Fatalf("from %s: API %s, legacy calls %d, running %s, healthy %v", from, res.API, n.LegacyUpgrades(), n.RunningVersion(), res.Healthy)
			}
		})
	}
}

// An upgrade to another image than the node booted (the inventory role's,
// UpgradeOptions.Schematic) never brings an extension that waits for its
// ExtensionServiceConfig to a node whose config lacks that document: a
// worker (worker image, worker config) upgraded with the control plane's
// Newt installer would, after its reboot, wait for newt's config and
// reboot every BootTimeout. Refused with nothing sent, in the dry run too;
// with the document in the node's config it goes ahead. And a node
// expected by name (UpgradeOptions.Hostname, the inventory's) that says
// it is another is refused before anything is sent.
func TestUpgradeNeverBringsAnExtensionWithoutItsConfig(t *testing.T) {
	e := newUpgradeEnv(t)
	wk := factory.BuiltinProfiles()[1]
	if _, err := e.fac.AddSchematic(wk.Schematic()); err != nil {
		t.Fatal(err)
	}
	workerCfg, cpCfg := must(os.ReadFile("testdata/talos114/valid/worker.yaml")), must(os.ReadFile("testdata/talos114/valid/controlplane.yaml"))
	worker := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: wk.Schematic(), Worker: true, Hostname: "worker-1", Config: workerCfg})
	for _, dry := range []bool{true, false} {
		var log progressLog
		o := e.opts(&log)
		o.Schematic, o.DryRun = e.cp.Schematic(), dry
		_, err := Upgrade(context.Background(), worker.Addr(), e.tc, o)
		if !errors.Is(err, ErrExtensionConfigMissing) || !errors.Is(err, ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "siderolabs/newt") || !strings.Contains(err.Error(), `ExtensionServiceConfig named "newt"`) || !strings.Contains(err.Error(), "nothing was sent") {
			t.Fatalf("dry run %v: %v", dry, err)
		}
	}
	if len(worker.Pulled())+len(worker.Upgrades())+worker.Reboots() != 0 {
		t.Fatalf("sent to the worker: pulls %v upgrades %v reboots %d", worker.Pulled(), worker.Upgrades(), worker.Reboots())
	}

	// The same image change with Newt's document in the config: planned.
	withESC := nodetest.StartNode(t, nodetest.NodeOptions{PKI: e.pki, Schematic: wk.Schematic(), Bootstrapped: true, Hostname: "cp-1", Config: cpCfg})
	var log progressLog
	o := e.opts(&log)
	o.Schematic, o.DryRun, o.Hostname = e.cp.Schematic(), true, "CP-1"
	if res, err := Upgrade(context.Background(), withESC.Addr(), e.tc, o); err != nil || res.SchematicID != e.cpID {
		t.Fatalf("with the document: %v", err)
	}

	// Another node than the one meant.
	for _, want := range []string{"cp-1", "worker-1.home.arpa"} {
		o := e.opts(&log)
		o.Hostname = want
		_, err := Upgrade(context.Background(), worker.Addr(), e.tc, o)
		if !errors.Is(err, ErrOtherNode) || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `says it is "worker-1"`) || !strings.Contains(err.Error(), "nothing was sent") {
			t.Fatalf("expecting %s: %v", want, err)
		}
	}
	if len(worker.Pulled())+len(worker.Upgrades())+worker.Reboots() != 0 {
		t.Fatalf("sent to the worker: pulls %v upgrades %v reboots %d", worker.Pulled(), worker.Upgrades(), worker.Reboots())
	}
}
