package node

import (
	"bytes"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
)

// A config's role is what Talos makes of machine.type
// (pkg/machinery/config/machine/machine.go ParseType): "join", the old
// word, and a type left out are a worker; an alias is its value. Reading
// the raw text alone let a worker config without machine.type (or with
// "join") pass as "no role" onto a control plane.
func TestConfigRoleAsTalosReadsIt(t *testing.T) {
	cases := []struct {
		name    string
		fixture string // worker-newt-esc.yaml or controlplane.yaml
		repl    string // replaces the machine.type line
		want    Role
	}{
		{"worker", "worker-newt-esc.yaml", "  type: worker\n", RoleWorker},
		{"controlplane", "controlplane.yaml", "  type: controlplane\n", RoleControlPlane},
		{"init", "controlplane.yaml", "  type: init\n", RoleInit},
		{"join is a worker", "worker-newt-esc.yaml", "  type: join\n", RoleWorker},
		{"left out is a worker", "worker-newt-esc.yaml", "", RoleWorker},
		{"an alias is its value", "worker-newt-esc.yaml", "  nodeLabels: {x: &t worker}\n  type: *t\n", RoleWorker},
		{"an alias of controlplane", "controlplane.yaml", "  nodeLabels: {x: &t controlplane}\n  type: *t\n", RoleControlPlane},
		{"a merge key is not read as left out", "controlplane.yaml", "  <<: {type: controlplane}\n", RoleUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := testkit.Testdata(t, c.fixture)
			line := []byte("  type: worker\n")
			if c.fixture == "controlplane.yaml" {
				line = []byte("  type: controlplane\n")
			}
			if !bytes.Contains(base, line) {
				t.Fatal("fixture: no machine.type line")
			}
			cfg, err := LoadConfig(bytes.Replace(base, line, []byte(c.repl), 1))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Role(); got != c.want {
				t.Errorf("Role() = %q, want %q (machine.type %q)", got, c.want, cfg.MachineType)
			}
		})
	}
	// No v1alpha1 document at all (a patch): no role, not a worker.
	cfg, err := LoadConfig([]byte("apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment:\n  - NEWT_ID=x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Role(); r != RoleUnknown {
		t.Errorf("a patch alone: Role() = %q, want none", r)
	}
}

// The incident checks' role finding names a worker config without
// machine.type as a worker config, not as a file without a machine
// config.
func TestInspectRoleOfTypeLeftOut(t *testing.T) {
	data := bytes.Replace(testkit.Testdata(t, "worker-newt-esc.yaml"), []byte("  type: worker\n"), nil, 1)
	cfg, err := LoadConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	var found *Finding
	for _, f := range checkRole(cfg, "controlplane") {
		if f.Code == CodeRoleMismatch {
			found = &f
		}
		if f.Code == CodeNoMachineConfig {
			t.Errorf("said to have no machine config: %s", f.Message)
		}
	}
	if found == nil {
		t.Fatal("no role mismatch for a worker config (machine.type left out) meant for a control plane")
	}
	if len(checkRole(cfg, "worker")) != 0 {
		t.Error("a worker config without machine.type refused for a worker")
	}
}
