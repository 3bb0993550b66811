package inventory

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
)

// A worker config put on the control plane's row is a role mismatch
// however its machine.type says worker: left out or "join" are a worker
// to Talos (machine.go ParseType). With Newt's document added, the
// incident check no longer trips, so only the role rule can refuse it.
func TestInventoryRoleOfWorkerConfigWithoutType(t *testing.T) {
	esc := "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment:\n  - PANGOLIN_ENDPOINT=https://127.0.0.1\n  - NEWT_ID=x\n  - NEWT_SECRET=y\n"
	line := []byte("    type: worker # Defines the role of the machine within the cluster.\n")
	for _, c := range []struct{ name, repl string }{
		{"machine.type left out", ""},
		{"machine.type join", "    type: join\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			kit := testkit.Inventory{Configs: true}
			path := kit.Write(t, dir)
			wk := bytes.ReplaceAll(testkit.Testdata(t, "talos114/valid/worker.yaml"), []byte("https://192.168.1.20:6443"), []byte("https://"+kit.IPs()[0]+":6443"))
			if !bytes.Contains(wk, line) {
				t.Fatal("fixture: no machine.type line")
			}
			testkit.WriteFile(t, dir, "talos/controlplane.yaml", append(bytes.Replace(wk, line, []byte(c.repl), 1), esc...))
			_, err := Load(path, Options{})
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("no problems: %v", err)
			}
			var found *Problem
			for i := range ps {
				if strings.Contains(ps[i].Message, "node cp-1:") && strings.Contains(ps[i].Message, "the node's role is controlplane") {
					found = &ps[i]
				}
			}
			if found == nil {
				t.Fatalf("no role problem for cp-1:\n%v", err)
			}
			if !strings.Contains(found.Message, "worker config") || !strings.Contains(found.Fix, "talos/controlplane.yaml") {
				t.Errorf("problem %q (fix %q): want it named a worker config and the control plane's file", found.Message, found.Fix)
			}
		})
	}
}

// An init config on the control plane's row is a control plane to Talos,
// but the inventory has no init role (deprecated): it is said as what it
// is, an init config, with the control plane's config as the fix, never
// "correct role:" (role: init is refused too).
func TestInventoryInitConfigOnTheControlPlaneRow(t *testing.T) {
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	path := kit.Write(t, dir)
	cp := bytes.ReplaceAll(testkit.Testdata(t, "talos114/valid/controlplane.yaml"), []byte("https://192.168.1.20:6443"), []byte("https://"+kit.IPs()[0]+":6443"))
	if !bytes.Contains(cp, []byte("    type: controlplane")) {
		t.Fatal("fixture: no machine.type line")
	}
	testkit.WriteFile(t, dir, "talos/controlplane.yaml", bytes.Replace(cp, []byte("    type: controlplane"), []byte("    type: init"), 1))
	_, err := Load(path, Options{})
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("no problems: %v", err)
	}
	for _, p := range ps {
		if strings.Contains(p.Message, "node cp-1:") && strings.Contains(p.Message, "init") {
			if !strings.Contains(p.Message, "an init config") || !strings.Contains(p.Message, "deprecated") || strings.Contains(p.Fix, "correct role") || !strings.Contains(p.Fix, "controlplane") {
				t.Errorf("problem %q (fix %q): want the init config said as deprecated, the controlplane config as the fix", p.Message, p.Fix)
			}
			return
		}
	}
	t.Fatalf("no problem for cp-1's init config:\n%v", err)
}
