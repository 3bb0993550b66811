package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// NextAfter is what plan says a node does after taking a config of
// role with the answer mode ("" = Talos <= 1.12's unset mode): the
// text the CLI and the GUI both show.
func nextAfter(version string, role node.Role, mode string) plan.NextStep {
	return plan.AfterApply(&node.Node{TalosVersion: version}, role, &node.ApplyResult{Messages: []node.ApplyMessage{{Mode: mode}}})
}

// apply says what the node does next, truthfully per generation: Talos
// 1.14 answers no-reboot and boots with the config (no "reboots"); 1.12
// does not say. (It said nothing about it before.)
func TestApplySaysWhatTheNodeDoesNext(t *testing.T) {
	for _, gen := range []struct {
		name string
		opts nodetest.Options
		next plan.NextStep
	}{
		{"1.14", nodetest.Options{Schematic: builtinSchematic(t, "worker")}, nextAfter(nodetest.DefaultVersion, "worker", node.ModeNoReboot)},
		{"legacy", nodetest.Options{Legacy: true}, nextAfter(nodetest.LegacyVersion, "worker", "")},
	} {
		srv := nodetest.Start(t, gen.opts)
		path, _ := testConfig(t, "worker.yaml")
		code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--role", "worker")
		if code != contract.ExitOK {
			t.Fatalf("%s: exit %d: %s", gen.name, code, stderr)
		}
		if !strings.Contains(stdout, gen.next.Node) || !strings.Contains(stdout, "leaves maintenance mode and boots with this config") {
			t.Errorf("%s: stdout lacks what the node does next (%q):\n%s", gen.name, gen.next.Node, stdout)
		}
		if strings.Contains(stdout+stderr, "installs and reboots") || strings.Contains(stdout+stderr, "has rebooted") {
			t.Errorf("%s: says the node reboots:\n%s%s", gen.name, stdout, stderr)
		}
		if strings.Contains(stderr, "bootstrap") {
			t.Errorf("%s: bootstrap after a worker config:\n%s", gen.name, stderr)
		}
	}
}

// An init config starts etcd by itself (Talos' etcd service bootstraps on
// machine type init): the CLI no longer tells the user to bootstrap it,
// as the GUI never did.
func TestApplyInitConfigNeedsNoBootstrap(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "controlplane")})
	_, data := testConfig(t, "controlplane.yaml")
	path := filepath.Join(t.TempDir(), "init.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "type: controlplane", "type: init", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "talosflash bootstrap") || !strings.Contains(stdout, "; next: an init config starts etcd as the cluster's first member by itself") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// apply --json carries the same next step.
func TestApplyJSONSaysWhatTheNodeDoesNext(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "controlplane")})
	path, _ := testConfig(t, "controlplane.yaml")
	code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Next *struct {
			Node              string `json:"node"`
			LeavesMaintenance bool   `json:"leaves_maintenance"`
			Bootstrap         bool   `json:"bootstrap"`
			Then              string `json:"then"`
		} `json:"next"`
	}
	if err := json.Unmarshal(answer(t, stdout, "apply"), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	want := nextAfter(nodetest.DefaultVersion, "controlplane", node.ModeNoReboot)
	if out.Next == nil || out.Next.Node != want.Node || !out.Next.LeavesMaintenance || !out.Next.Bootstrap || out.Next.Then != want.Then {
		t.Fatalf("next %+v, want %+v", out.Next, want)
	}
}
