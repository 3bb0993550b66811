package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/extensions"
	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// followInventory writes an inventory of cp-1 and worker-1 on
// 127.0.0.51-52 with the 1.14 fixtures; worker-1's profile is workerProfile.
// It returns the inventory, the talosconfig (generated with the configs)
// and the secret fragments of both.
func followInventory(t *testing.T, workerProfile string) (inv, tc string, frags []string) {
	t.Helper()
	return clusterInventory(t, "127.0.0.51", "127.0.0.52", "https://127.0.0.51:6443", workerProfile)
}

// clusterInventory is followInventory at other addresses, with the
// configs' cluster endpoint replaced by endpoint.
func clusterInventory(t *testing.T, cpIP, workerIP, endpoint, workerProfile string) (inv, tc string, frags []string) {
	t.Helper()
	dir := t.TempDir()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "node", "testdata", "talos114", "valid", name))
		if err != nil {
			t.Skipf("no 1.14 fixture: %v", err)
		}
		return b
	}
	worker := []byte(strings.ReplaceAll(string(read("worker.yaml")), "https://192.168.1.20:6443", endpoint))
	cp := []byte(strings.ReplaceAll(string(read("controlplane.yaml")), "https://192.168.1.20:6443", endpoint))
	tcData := read("talosconfig")
	files := map[string][]byte{"talos/worker.yaml": worker, "talos/controlplane.yaml": cp, "talosconfig": tcData,
		"talosflash.yaml": []byte("cluster: home\ngateway: 127.0.0.1\nnodes:\n" +
			"  - hostname: cp-1\n    role: controlplane\n    address: " + cpIP + "/8\n    config: talos/controlplane.yaml\n" +
			"  - hostname: worker-1\n    role: worker\n    profile: " + workerProfile + "\n    address: " + workerIP + "/8\n    config: talos/worker.yaml\n")}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	frags, err := nodetest.SecretFragments(tcData)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]byte{cp, worker} {
		f, err := nodetest.ConfigSecretFragments(c)
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f...)
	}
	return filepath.Join(dir, "talosflash.yaml"), filepath.Join(dir, "talosconfig"), frags
}

// The incident, live after apply: worker-1's card holds the control
// plane's Newt image, but what the node reports before its config does not
// say so (its extension statuses name another schematic: a card flashed
// elsewhere), so no check before the send can see it (an inventory that
// gives worker-1 the Newt image is refused before any card:
// TestIncidentRefusedAtEveryDoor). Following it, talosflash names the
// waiting ext-newt with the countdown to the BootTimeout reboot within its
// first reads (one scaled minute of the node's clock), and the control
// plane waits for its bootstrap. Exit 7, no secret on any output.
func TestApplyFollowDiagnosesTheIncident(t *testing.T) {
	inv, tc, frags := followInventory(t, "worker")
	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.51"))
	clock := nodetest.NewClock(0)
	nodetest.Start(t, nodetest.Options{Addr: "127.0.0.51:" + port, Hostname: "cp-1", Schematic: builtinSchematic(t, "controlplane"), BootConfig: true})
	w := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.52:" + port, Hostname: "worker-1", Schematic: builtinSchematic(t, "controlplane"),
		ExtensionStatuses: []extensions.Metadata{{Name: "schematic", Version: strings.Repeat("0", 64)}},
		BootConfig:        true, Clock: clock, BootTimeout: 70 * time.Minute})
	go func() { // the node's clock moves one scaled minute once it booted
		<-w.Booted()
		clock.Advance(time.Minute)
	}()

	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "20s", "--force",
		"--talosconfig", tc, "--interval", "50ms", "--json")
	if code != contract.ExitConfig {
		t.Fatalf("exit %d, want %d (a node stuck)\n%s\n%s", code, contract.ExitConfig, stdout, stderr)
	}
	var follows []map[string]any
	for _, ev := range jsonEvents(t, stdout) {
		if ev["event"] == "follow" {
			follows = append(follows, ev)
		}
	}
	if len(follows) != 2 {
		t.Fatalf("%d follow lines, want one per node:\n%s", len(follows), stdout)
	}
	cp, wk := follows[0], follows[1]
	if cp["hostname"] != "cp-1" || cp["outcome"] != "awaiting-bootstrap" || cp["stage"] != "booting" {
		t.Errorf("cp-1: %v", cp)
	}
	msg, _ := wk["message"].(string)
	if wk["outcome"] != "stuck" || !strings.Contains(msg, "ext-newt waits for an ExtensionServiceConfig named newt") ||
		!strings.Contains(msg, "Talos reboots it at BootTimeout (70 min)") || !strings.Contains(msg, "Fix: write an ExtensionServiceConfig document named newt") {
		t.Errorf("worker-1: %v", wk)
	}
	d := wk["diagnoses"].([]any)[0].(map[string]any)
	if d["code"] != "extension-config-missing" || d["reboot_in_seconds"].(float64) <= 60*60 || d["reboot_in_seconds"].(float64) > 70*60 {
		t.Errorf("diagnosis %v", d)
	}
	for _, want := range []string{"following each node until it runs its config", "worker-1: booting, not ready: worker-1 ", "cp-1: booting, not ready"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	assertNoFragments(t, frags, stdout, stderr)
	assertNoPEM(t, stdout, stderr)
}
