package cli

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// statusInventory writes an inventory of the user's cluster on
// 127.0.0.31-33 (no configs: status does not need them) and returns its
// path and the port every fake listens on.
func statusInventory(t *testing.T) (string, string) {
	t.Helper()
	inv := testkit.Inventory{First: "127.0.0.31"}
	ips := inv.IPs()
	return inv.Write(t, t.TempDir()), strconv.Itoa(testkit.FreePort(t, ips[:]...))
}

// The incident: worker-1 was flashed with the control plane's Newt image
// and has no ExtensionServiceConfig named newt. It boots forever, 12 min
// in on its clock: status names the waiting service, the countdown to the
// BootTimeout reboot and both fixes; --watch sees the reboot (new boot ID)
// when the fake's clock passes BootTimeout.
func TestStatusIncidentWaitingExtension(t *testing.T) {
	pki := newTestPKI(t)
	tc, frags := talosconfigFile(t, pki, "os:admin")
	inv, port := statusInventory(t)
	clock := nodetest.NewClock(12 * time.Minute)
	w1 := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Addr: "127.0.0.32:" + port, Worker: true, Hostname: "worker-1",
		Schematic: builtinSchematic(t, "controlplane"), Stage: "booting", WaitingExtensions: []string{"newt"}, Clock: clock,
		RebootDowntime: 20 * time.Millisecond})

	code, stdout, stderr := cliRun(t, "status", "--inventory", inv, "--hostname", "worker-1", "--port", port, "--talosconfig", tc)
	// An ERROR printed is a failed check, not exit 0 (issue 39).
	if code != contract.ExitConfig || !strings.Contains(stderr, "worker-1: worker-1 has been booting for 12 min") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"worker-1 (127.0.0.32:" + port + "): booting, ready, in booting for 12 min",
		"ext-newt Waiting (Waiting for extension service config)",
		"ERROR: worker-1 has been booting for 12 min: ext-newt waits for an ExtensionServiceConfig named newt; Talos reboots it at BootTimeout (70 min), in about 58 min",
		"fix: write an ExtensionServiceConfig document named newt",
		"then send it to the running node: talosflash patch --inventory " + inv + " --hostname worker-1 --talosconfig " + tc + " --patch @newt.yaml; ext-newt then starts, no reboot",
		"or flash worker-1 with the worker image (it booted the controlplane image)",
		"NOT its role's worker",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	assertNoFragments(t, frags, stdout, stderr)
	assertNoPEM(t, stdout, stderr)

	// --watch --json: the first line, then the reboot once the clock passes 70 min.
	boot1 := w1.BootID()
	calls := w1.ServiceListCalls()
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for w1.ServiceListCalls() < calls+2 && time.Now().Before(deadline) { // the first read is done
			time.Sleep(5 * time.Millisecond)
		}
		clock.Advance(58 * time.Minute)
	}()
	start := time.Now()
	code, stdout, stderr = cliRun(t, "status", "--inventory", inv, "--hostname", "worker-1", "--port", port, "--talosconfig", tc,
		"--watch", "--interval", "50ms", "--for", "2500ms", "--json")
	if code != contract.ExitConfig { // the last read: stuck again after the reboot
		t.Fatalf("watch: exit %d\n%s%s", code, stdout, stderr)
	}
	// --for ends the watch: bounded, with room for a busy machine (a 4 s
	// bound failed under load; a watch that ignored --for never ends).
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("watch took %s", d)
	}
	lines := statusLines(t, stdout)
	if len(lines) < 2 {
		t.Fatalf("want the first read and the reboot, got %d lines:\n%s", len(lines), stdout)
	}
	first, last := lines[0], lines[len(lines)-1]
	if first["boot_id"] != boot1 || first["stage"] != "booting" || len(first["diagnoses"].([]any)) == 0 {
		t.Errorf("first line: %v", first)
	}
	d := first["diagnoses"].([]any)[0].(map[string]any)
	if d["code"] != "extension-config-missing" || d["reboot_in_seconds"].(float64) < 57*60 || d["reboot_in_seconds"].(float64) > 58*60 {
		t.Errorf("first diagnosis: %v", d)
	}
	var reboot map[string]any // the first line of the new boot
	for _, l := range lines[1:] {
		if l["boot_id"] == w1.BootID() {
			reboot = l
			break
		}
	}
	if reboot == nil || w1.Reboots() != 1 || last["reboots"] != float64(1) || reboot["reboots"] != float64(1) || w1.BootID() == boot1 {
		t.Fatalf("no reboot seen (node rebooted %d times, boot %s):\n%s", w1.Reboots(), w1.BootID(), stdout)
	}
	// The new boot waits again, diagnosed again (the countdown restarts with the boot).
	if rd := reboot["diagnoses"].([]any); len(rd) == 0 || rd[0].(map[string]any)["code"] != "extension-config-missing" || reboot["stage"] != "booting" {
		t.Errorf("the new boot lost the diagnosis: %v", reboot)
	}
	assertNoFragments(t, frags, stdout, stderr)
	assertNoPEM(t, stdout, stderr)
}

// A healthy control plane: running, ready, etcd healthy with its member;
// the JSON line carries the documented fields.
func TestStatusHealthyControlPlane(t *testing.T) {
	pki := newTestPKI(t)
	tc, frags := talosconfigFile(t, pki, "os:admin")
	inv, port := statusInventory(t)
	nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Addr: "127.0.0.31:" + port, Hostname: "cp-1",
		Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true, Clock: nodetest.NewClock(3 * time.Hour)})

	code, stdout, stderr := cliRun(t, "status", "--inventory", inv, "--hostname", "cp-1", "--port", port, "--talosconfig", tc)
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"cp-1 (127.0.0.31:" + port + "): running, ready · Talos v1.14.5", "etcd Running healthy",
		"etcd members: cp-1 2a5c9e01b7d4f3c8", "profile controlplane", "as its role's"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "ERROR") || strings.Contains(stdout, "WARNING") {
		t.Errorf("a healthy node with a diagnosis:\n%s", stdout)
	}

	code, stdout, stderr = cliRun(t, "status", "--inventory", inv, "--hostname", "cp-1", "--port", port, "--talosconfig", tc, "--json")
	if code != contract.ExitOK {
		t.Fatalf("json: exit %d\n%s%s", code, stdout, stderr)
	}
	lines := statusLines(t, stdout)
	if len(lines) != 1 {
		t.Fatalf("%d lines:\n%s", len(lines), stdout)
	}
	raw := strings.TrimSpace(stdout)
	keys := assertSnakeCase(t, "node_status", []byte(raw))
	wantKeys(t, "node_status", keys, "hostname", "endpoint", "role", "profile", "time", "reachable", "talos_version", "stage", "ready",
		"unmet_conditions", "services", "services.id", "services.state", "services.health", "booted", "booted.schematic_id",
		"matches_profile", "image_ok", "boot_id", "uptime_seconds", "reboots", "etcd.members.id", "etcd.members.hostname",
		"etcd.members.peer_urls", "etcd.members.learner", "diagnoses", "healthy")
	docKeys(t, keys)
	l := lines[0]
	if l["stage"] != "running" || l["ready"] != true || l["healthy"] != true || l["image_ok"] != true || l["matches_profile"] != "controlplane" {
		t.Errorf("line: %v", l)
	}
	assertNoFragments(t, frags, stdout, stderr)
	assertNoPEM(t, stdout, stderr)

	// A node that does not answer: exit 3 and the line says so.
	code, stdout, _ = cliRun(t, "status", "--inventory", inv, "--hostname", "worker-2", "--port", port, "--talosconfig", tc, "--json", "--timeout", "300ms")
	if code != contract.ExitNetwork || !strings.Contains(stdout, `"reachable":false`) {
		t.Errorf("unreachable: exit %d\n%s", code, stdout)
	}
}

// statusLines decodes the node_status lines of stdout (each must carry the
// contract envelope).
func statusLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		ev, ok := contract.Decode([]byte(line))
		if !ok || ev.Contract != contract.Version || !contract.Known(ev.Type) {
			t.Fatalf("not a contract line: %q", line)
		}
		if ev.Type != contract.TypeNodeStatus {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// docKeys: every top-level key of a node_status line is in docs/JSON.md's row.
func docKeys(t *testing.T, keys map[string]bool) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/JSON.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.Contains(l, "| `node_status`") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("docs/JSON.md has no node_status row")
	}
	for k := range keys {
		leaf := k[strings.LastIndex(k, ".")+1:]
		if leaf == "event" || leaf == "contract" {
			continue
		}
		if !strings.Contains(row, "`"+leaf+"`") {
			t.Errorf("docs/JSON.md's node_status row lacks `%s`", leaf)
		}
	}
}

var pemRe = regexp.MustCompile(`BEGIN|PRIVATE KEY|CERTIFICATE-----`)

func assertNoPEM(t *testing.T, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		if pemRe.MatchString(o) {
			t.Fatalf("PEM on an output:\n%s", o)
		}
	}
}
