package cli

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/node/nodetest"
)

func upgradeFactory(t *testing.T) (*factorytest.Server, string, string, string) {
	t.Helper()
	fac := factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6")
	cpID, err := fac.AddSchematic(builtinSchematic(t, "controlplane"))
	if err != nil {
		t.Fatal(err)
	}
	wkID, err := fac.AddSchematic(builtinSchematic(t, "worker"))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(fac.URL)
	return fac, u.Host, cpID, wkID
}

func TestUpgradeCommandDryRunSendsNothing(t *testing.T) {
	fac, host, cpID, wkID := upgradeFactory(t)
	pki := newTestPKI(t)
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true})
	wk := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "worker"), Worker: true})
	tc, frags := talosconfigFile(t, pki, "os:admin")

	code, stdout, stderr := cliRun(t, "upgrade", "--node", cp.Addr()+","+wk.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--dry-run")
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"installer: " + host + "/metal-installer/" + cpID + ":v1.14.6 (" + factorytest.InstallerDigest("metal-installer", cpID, "v1.14.6") + ")",
		"installer: " + host + "/metal-installer/" + wkID + ":v1.14.6",
		"extensions newt", "dry run: would pull the installer",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, n := range []*nodetest.Node{cp, wk} {
		if len(n.Upgrades()) != 0 || len(n.Pulled()) != 0 || n.Reboots() != 0 {
			t.Fatalf("dry run sent something: %v %v %d", n.Upgrades(), n.Pulled(), n.Reboots())
		}
	}
	if strings.Contains(stdout, "ghcr.io/siderolabs/installer") {
		t.Fatal("the generic installer appears")
	}
	assertNoFragments(t, frags, stdout, stderr)
}

func TestUpgradeCommandUpgradesInOrder(t *testing.T) {
	fac, host, cpID, wkID := upgradeFactory(t)
	pki := newTestPKI(t)
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true})
	wk := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "worker"), Worker: true})
	tc, frags := talosconfigFile(t, pki, "os:admin")

	code, stdout, stderr := cliRun(t, "upgrade", "-n", cp.Addr(), "-n", wk.Addr(), "--to", "1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var got []upgradeJSON
	if err := json.Unmarshal(answer(t, stdout, "upgrade"), &got); err != nil || len(got) != 2 {
		t.Fatalf("json %v:\n%s", err, stdout)
	}
	if got[0].Node != cp.Addr() || got[1].Node != wk.Addr() || !got[0].Healthy || !got[1].Healthy || !got[0].Rebooted {
		t.Fatalf("results %+v", got)
	}
	if !slices.Equal(cp.Upgrades(), []string{host + "/metal-installer/" + cpID + ":v1.14.6"}) ||
		!slices.Equal(wk.Upgrades(), []string{host + "/metal-installer/" + wkID + ":v1.14.6"}) {
		t.Fatalf("nodes got %v and %v", cp.Upgrades(), wk.Upgrades())
	}
	if cp.RunningVersion() != "v1.14.6" || wk.RunningVersion() != "v1.14.6" {
		t.Fatal("not running the new version")
	}
	// Each plan (the node's own installer) is shown before the node is touched.
	if i, j := strings.Index(stderr, "installer: "+host+"/metal-installer/"+cpID), strings.Index(stderr, cp.Addr()+": pulling"); i < 0 || j < i {
		t.Fatalf("plan not shown before the pull:\n%s", stderr)
	}
	// The control plane was healthy before the worker started.
	cpDone := strings.Index(stderr, cp.Addr()+": running v1.14.6")
	wkStart := strings.Index(stderr, wk.Addr()+": pulling")
	if cpDone < 0 || wkStart < 0 || wkStart < cpDone {
		t.Fatalf("order: control plane healthy at %d, worker started at %d\n%s", cpDone, wkStart, stderr)
	}
	assertNoFragments(t, frags, stdout, stderr)
}

func TestUpgradeCommandRefusals(t *testing.T) {
	fac, _, _, _ := upgradeFactory(t)
	pki := newTestPKI(t)
	tc, frags := talosconfigFile(t, pki, "os:admin")
	noSchematic := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
	code, stdout, stderr := cliRun(t, "upgrade", "--node", noSchematic.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--timeout", "1m")
	if code != contract.ExitUsage || !strings.Contains(stderr, "refusing to guess an installer") || len(noSchematic.Upgrades()) != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	// A version the factory does not offer: exit 3, nothing sent.
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "worker"), Worker: true})
	code, stdout, stderr = cliRun(t, "upgrade", "--node", n.Addr(), "--to", "v1.14.7", "--talosconfig", tc, "--factory", fac.URL, "--timeout", "1m")
	if code != contract.ExitNetwork || !strings.Contains(stderr, "installer image not available") || len(n.Upgrades()) != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	// A downgrade is refused as bad input (exit 2; it was 1, "internal"), nothing sent.
	code, stdout, stderr = cliRun(t, "upgrade", "--node", n.Addr(), "--to", "v1.13.0", "--talosconfig", tc, "--factory", fac.URL, "--timeout", "1m")
	if code != contract.ExitUsage || !strings.Contains(stderr, "does not downgrade") || len(n.Upgrades()) != 0 {
		t.Fatalf("downgrade: exit %d\n%s%s", code, stdout, stderr)
	}
	// The installer fails on the node: exit 8, no reboot, the next node untouched.
	bad := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "worker"), UpgradeExitCode: 1, Worker: true})
	code, stdout, stderr = cliRun(t, "upgrade", "--node", bad.Addr()+","+n.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--timeout", "1m")
	if code != contract.ExitApply || bad.Reboots() != 0 || len(n.Upgrades()) != 0 || !strings.Contains(stderr, "not upgraded: "+n.Addr()) {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	// Another cluster's talosconfig: nothing sent, no key material shown.
	other, ofrags := talosconfigFile(t, newTestPKI(t), "os:admin")
	code, stdout, stderr = cliRun(t, "upgrade", "--node", n.Addr(), "--to", "v1.14.6", "--talosconfig", other, "--factory", fac.URL)
	if code != contract.ExitNetwork || !strings.Contains(stderr, "not signed by the talosconfig's CA") || len(n.Upgrades()) != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	assertNoFragments(t, append(frags, ofrags...), stdout, stderr)
}
