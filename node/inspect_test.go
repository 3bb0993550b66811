package node_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

func piOverlay() schematic.Overlay {
	return schematic.Overlay{Image: "siderolabs/sbc-raspberrypi", Name: "rpi_generic"}
}

// The homelab's schematics: controlplane = overlay + Newt, worker = overlay only.
func cpSchematic() *schematic.Schematic {
	return &schematic.Schematic{Overlay: piOverlay(), Customization: schematic.Customization{
		SystemExtensions: schematic.SystemExtensions{OfficialExtensions: []string{"siderolabs/newt"}},
	}}
}

func workerSchematic() *schematic.Schematic { return &schematic.Schematic{Overlay: piOverlay()} }

func loadTestConfig(t *testing.T, name string) *node.Config {
	t.Helper()
	cfg, err := node.LoadConfig(readTestdata(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func byCode(fs []node.Finding) map[string]node.Finding {
	m := map[string]node.Finding{}
	for _, f := range fs {
		m[f.Code] = f
	}
	return m
}

func TestSchematicIDsOfFixtures(t *testing.T) {
	// testdata installer images are built from these IDs: keep them honest.
	for want, s := range map[string]*schematic.Schematic{cpID: cpSchematic(), workerID: workerSchematic()} {
		if id, err := factory.SchematicID(s); err != nil || id != want {
			t.Errorf("schematic ID %s, want %s (%v)", id, want, err)
		}
	}
}

// The incident: workers flashed with the controlplane (Newt) schematic, and
// a worker config without an ExtensionServiceConfig for Newt.
func TestInspectNewtIncident(t *testing.T) {
	fs := node.InspectWith(loadTestConfig(t, "worker.yaml"), node.InspectOptions{Flashed: cpSchematic(), Role: "worker"})
	got := byCode(fs)
	f, ok := got[node.CodeExtensionConfigMissing]
	if !ok {
		t.Fatalf("Newt check did not fire: %+v", fs)
	}
	if f.Severity != node.SeverityError || fs[0].Code != node.CodeExtensionConfigMissing {
		t.Errorf("finding %+v should be the first, an error", f)
	}
	for _, want := range []string{"siderolabs/newt", `"newt"`, "booting", "BootTimeout (70 min)", "71 minutes"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q lacks %q", f.Message, want)
		}
	}
	for _, want := range []string{"kind: ExtensionServiceConfig", "name: newt", "NEWT_SECRET=...", "without siderolabs/newt"} {
		if !strings.Contains(f.Fix, want) {
			t.Errorf("fix %q lacks %q", f.Fix, want)
		}
	}
	// worker.yaml installs the worker schematic, the card has the controlplane one.
	if m, ok := got[node.CodeInstallImageMismatch]; !ok || m.Severity != node.SeverityWarning {
		t.Errorf("schematic mismatch not reported: %+v", fs)
	}
}

// booted is what a factory node reports for s (ExtensionStatuses).
func booted(s *schematic.Schematic) *node.Booted {
	id, _ := factory.SchematicID(s)
	b := &node.Booted{SchematicID: id, Schematic: s, Overlay: s.Overlay.Image}
	for _, e := range s.Customization.SystemExtensions.OfficialExtensions {
		b.Extensions = append(b.Extensions, e[strings.LastIndex(e, "/")+1:])
	}
	return b
}

func TestInspectFixedSetups(t *testing.T) {
	for name, fs := range map[string][]node.Finding{
		"worker schematic without newt":  node.InspectWith(loadTestConfig(t, "worker.yaml"), node.InspectOptions{Booted: booted(workerSchematic()), Role: "worker"}),
		"newt schematic with ESC":        node.InspectWith(loadTestConfig(t, "worker-newt-esc.yaml"), node.InspectOptions{Booted: booted(cpSchematic()), Role: "worker"}),
		"controlplane with ESC":          node.InspectWith(loadTestConfig(t, "controlplane.yaml"), node.InspectOptions{Booted: booted(cpSchematic()), Role: "controlplane"}),
		"v1.14 worker on worker image":   node.InspectWith(loadTestConfig(t, "talos114/valid/worker.yaml"), node.InspectOptions{Booted: booted(workerSchematic()), Role: "worker", TalosVersion: "v1.14.5"}),
		"v1.14 controlplane on cp image": node.InspectWith(loadTestConfig(t, "talos114/valid/controlplane.yaml"), node.InspectOptions{Booted: booted(cpSchematic()), Role: "controlplane", TalosVersion: "v1.14.5"}),
	} {
		if len(fs) != 0 {
			t.Errorf("%s: unexpected findings %+v", name, fs)
		}
	}
}

// What the node booted wins over what the user declared: a worker config
// for a node that booted the Newt image is blocked even when the user's
// declared schematic is the worker one.
func TestInspectBootedWinsOverDeclared(t *testing.T) {
	for _, file := range []string{"worker.yaml", "worker-v114.yaml"} {
		fs := node.InspectWith(loadTestConfig(t, file), node.InspectOptions{Booted: booted(cpSchematic()), Flashed: workerSchematic(), Role: "worker", Node: "192.168.1.51"})
		got := byCode(fs)
		f, ok := got[node.CodeExtensionConfigMissing]
		if !ok || f.Severity != node.SeverityError || !strings.Contains(f.Message, "the node booted an image with siderolabs/newt") {
			t.Fatalf("%s: %+v", file, fs)
		}
		m, ok := got[node.CodeInstallImageMismatch]
		if !ok || !strings.Contains(m.Fix, "talosctl --nodes 192.168.1.51 --endpoints 192.168.1.51 upgrade --image factory.talos.dev/metal-installer/"+cpID+":v1.14.5") {
			t.Errorf("%s: upgrade trap: %+v", file, m)
		}
		if _, fb := got[node.CodeBootedUnknown]; fb {
			t.Errorf("%s: fallback reported although the node said what it booted", file)
		}
	}
	// The v1.14 config's installer comes from its UnattendedInstallConfig.
	m := byCode(node.InspectWith(loadTestConfig(t, "worker-v114.yaml"), node.InspectOptions{Booted: booted(cpSchematic())}))[node.CodeInstallImageMismatch]
	if !strings.Contains(m.Message, "UnattendedInstallConfig installer.image") {
		t.Errorf("mismatch message %q does not name the UnattendedInstallConfig", m.Message)
	}
}

// Without extension statuses the declared role is the fallback, and the
// findings say so.
func TestInspectFallbackIsAnnounced(t *testing.T) {
	fs := node.InspectWith(loadTestConfig(t, "worker.yaml"), node.InspectOptions{Flashed: workerSchematic(), Role: "worker", Fallback: "the role you declared (worker)"})
	if len(fs) != 1 || fs[0].Code != node.CodeBootedUnknown || !strings.Contains(fs[0].Message, "the role you declared (worker)") {
		t.Fatalf("%+v", fs)
	}
}

// Every extension of the list blocks without its document.
func TestInspectEveryServiceExtension(t *testing.T) {
	cfg := loadTestConfig(t, "worker.yaml")
	if n := len(node.ServiceExtensions()); n != 10 {
		t.Errorf("%d service extensions, want the 10 of siderolabs/extensions", n)
	}
	for _, se := range node.ServiceExtensions() {
		b := &node.Booted{SchematicID: workerID, Extensions: []string{se.Extension[strings.LastIndex(se.Extension, "/")+1:]}} // manifest name
		f, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Booted: b}))[node.CodeExtensionConfigMissing]
		if !ok || !strings.Contains(f.Fix, "name: "+se.ConfigName) {
			t.Errorf("%s: %+v", se.Extension, f)
		}
	}
}

func TestInspectResolvesSchematicFromInstaller(t *testing.T) {
	cfg := loadTestConfig(t, "worker.yaml")
	cfg.InstallImage = "factory.talos.dev/metal-installer/" + cpID + ":v1.14.5"

	var asked []string
	resolve := func(id string) (*schematic.Schematic, error) {
		asked = append(asked, id)
		if id == cpID {
			return cpSchematic(), nil
		}
		return nil, errors.New("unknown schematic")
	}
	fs := node.InspectWith(cfg, node.InspectOptions{Role: "worker", Resolve: resolve})
	if _, ok := byCode(fs)[node.CodeExtensionConfigMissing]; !ok || len(asked) != 1 || asked[0] != cpID {
		t.Errorf("findings %+v, resolver asked %v", fs, asked)
	}

	// Without a resolver only the ID is known: say so instead of guessing.
	fs = node.InspectWith(cfg, node.InspectOptions{Flashed: nil, Role: "worker"})
	if f, ok := byCode(fs)[node.CodeSchematicUnknown]; !ok || f.Severity != node.SeverityInfo || len(fs) != 1 {
		t.Errorf("findings %+v", fs)
	}
}

func TestInspectGenericInstaller(t *testing.T) {
	fs := node.InspectWith(loadTestConfig(t, "worker-generic-installer.yaml"), node.InspectOptions{
		Flashed: workerSchematic(), Role: "worker", Node: "192.168.1.21",
	})
	f, ok := byCode(fs)[node.CodeInstallImageGeneric]
	if !ok || f.Severity != node.SeverityWarning || !strings.Contains(f.Message, "overlay") {
		t.Fatalf("findings %+v", fs)
	}
	want := "talosctl --nodes 192.168.1.21 --endpoints 192.168.1.21 upgrade --image factory.talos.dev/metal-installer/" + workerID + ":" + factory.DefaultTalosVersion
	if !strings.Contains(f.Fix, want) {
		t.Errorf("fix %q lacks %q", f.Fix, want)
	}
}

func TestInspectMissingOrForeignInstallImage(t *testing.T) {
	cfg := loadTestConfig(t, "worker.yaml")
	cfg.InstallImage = ""
	if _, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Flashed: workerSchematic(), Role: "worker"}))[node.CodeInstallImageMissing]; !ok {
		t.Error("missing install image not reported")
	}
	cfg.InstallImage = "registry.example.com/my/installer:v1"
	if _, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Flashed: workerSchematic(), Role: "worker"}))[node.CodeInstallImageForeign]; !ok {
		t.Error("non-factory installer not reported")
	}
}

func TestInspectRoleMismatch(t *testing.T) {
	fs := node.InspectWith(loadTestConfig(t, "worker.yaml"), node.InspectOptions{Flashed: workerSchematic(), Role: "controlplane"})
	f, ok := byCode(fs)[node.CodeRoleMismatch]
	if !ok || f.Severity != node.SeverityError || !strings.Contains(f.Message, "worker config") || !strings.Contains(f.Message, "controlplane") {
		t.Fatalf("findings %+v", fs)
	}
	// init is a controlplane type.
	cfg := loadTestConfig(t, "controlplane.yaml")
	cfg.MachineType = "init"
	if _, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Flashed: cpSchematic(), Role: "controlplane"}))[node.CodeRoleMismatch]; ok {
		t.Error("init reported as a mismatch for controlplane")
	}
	// The role check compares roles as Talos reads them, typed: a word
	// Talos refuses is no role's config, init wants controlplane.yaml, and
	// an unknown intended role skips the check.
	for _, c := range []struct {
		machineType string
		want        node.Role
		message     string // "" no mismatch
		fix         string
	}{
		{"wroker", node.RoleWorker, "this is a wroker config (machine.type) but the node is meant to be a worker", "apply the worker config to this node (e.g. worker.yaml)"},
		{"wroker", node.RoleUnknown, "", ""},
		{"worker", node.RoleInit, "this is a worker config (machine.type) but the node is meant to be an init", "apply the controlplane config to this node (e.g. controlplane.yaml)"},
		{"join", node.RoleWorker, "", ""},
		{"join", node.RoleControlPlane, "this is a worker config (machine.type: join, a worker to Talos) but the node is meant to be a controlplane", "apply the controlplane config"},
		{"controlplane", node.RoleInit, "", ""},
	} {
		cfg := loadTestConfig(t, "controlplane.yaml")
		cfg.MachineType = c.machineType
		f, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Flashed: cpSchematic(), Role: c.want}))[node.CodeRoleMismatch]
		if ok != (c.message != "") || ok && (f.Message != c.message || !strings.HasPrefix(f.Fix, c.fix)) {
			t.Errorf("machine.type %s for a %q node: mismatch %v %+v", c.machineType, c.want, ok, f)
		}
	}
}

func TestInspectUnusedESCAndPatchOnly(t *testing.T) {
	fs := node.InspectWith(loadTestConfig(t, "controlplane.yaml"), node.InspectOptions{Flashed: workerSchematic(), Role: "controlplane"})
	if f, ok := byCode(fs)[node.CodeExtensionConfigUnused]; !ok || f.Severity != node.SeverityInfo {
		t.Errorf("findings %+v", fs)
	}
	cfg := &node.Config{Kinds: []string{"ExtensionServiceConfig"}, ExtensionServices: []string{"newt"}}
	if _, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Flashed: cpSchematic(), Role: "worker"}))[node.CodeNoMachineConfig]; !ok {
		t.Error("patch-only file not reported")
	}
	if node.InspectWith(nil, node.InspectOptions{Flashed: nil, Role: ""}) != nil {
		t.Error("nil config produced findings")
	}
}

func TestUpgradeCommand(t *testing.T) {
	ref := "factory.talos.dev/metal-installer/" + cpID + ":v1.14.5"
	if got, want := node.UpgradeCommand("192.168.1.10", ref), "talosctl --nodes 192.168.1.10 --endpoints 192.168.1.10 upgrade --image "+ref; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := node.UpgradeCommand("", ""); !strings.Contains(got, "--nodes <node-ip>") || !strings.Contains(got, "<schematic-id>") {
		t.Errorf("placeholders: %q", got)
	}
	if got := node.UpgradeCommand("a b;rm -rf /", ref); !strings.Contains(got, "'a b;rm -rf /'") {
		t.Errorf("unsafe node not quoted: %q", got)
	}
}

// A node that does not say what it booted, no declared role: the only
// schematic left is the config's own installer. Checking a config against
// itself proves nothing about the card, and the findings say so.
func TestInspectAgainstOwnInstallerIsAnnounced(t *testing.T) {
	cfg := loadTestConfig(t, "worker.yaml") // installer: the worker schematic
	resolve := func(id string) (*schematic.Schematic, error) {
		if id == workerID {
			return workerSchematic(), nil
		}
		return nil, errors.New("unknown schematic")
	}
	fs := node.InspectWith(cfg, node.InspectOptions{Resolve: resolve})
	f, ok := byCode(fs)[node.CodeCheckedAgainstConfig]
	if !ok || f.Severity != node.SeverityInfo || len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	for _, want := range []string{"does not report what it booted", "config's own install image", factory.ShortID(workerID), "--role"} {
		if !strings.Contains(f.Message+" "+f.Fix, want) {
			t.Errorf("finding lacks %q: %+v", want, f)
		}
	}
}

// An ExtensionServiceConfig for Newt that lacks a variable Newt needs
// (its environment cut by a replacement or a delete-and-readd) leaves the
// tunnel down: a warning naming what is missing, never the values. Config
// files in the document (a config Newt may read) and a complete
// environment say nothing.
func TestInspectNewtConfigIncomplete(t *testing.T) {
	w := string(readTestdata(t, "worker.yaml"))
	esc := "\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n"
	for body, missing := range map[string]string{
		"environment:\n  - PANGOLIN_ENDPOINT=https://p.example.net\n":                                             "NEWT_ID, NEWT_SECRET",
		"environment:\n  - PANGOLIN_ENDPOINT=https://p.example.net\n  - NEWT_ID=abc\n  - NEWT_SECRET=\n":          "NEWT_SECRET",
		"environment:\n  - PANGOLIN_ENDPOINT=https://p.example.net\n  - NEWT_ID=abc\n  - NEWT_SECRET=S3cr3tZq9\n": "",
		"configFiles:\n  - content: x\n    mountPath: /etc/newt.json\nenvironment:\n  - NEWT_ID=abc\n":            "",
	} {
		cfg, err := node.LoadConfig([]byte(w + esc + body))
		if err != nil {
			t.Fatal(err)
		}
		f, ok := byCode(node.InspectWith(cfg, node.InspectOptions{Flashed: cpSchematic()}))[node.CodeExtensionConfigIncomplete]
		switch {
		case missing == "" && ok:
			t.Fatalf("%q: %+v", body, f)
		case missing != "" && (!ok || f.Severity != node.SeverityWarning || !strings.Contains(f.Message, `ExtensionServiceConfig "newt" does not set `+missing+":") ||
			strings.Contains(f.Message+f.Fix, "p.example.net")):
			t.Fatalf("%q: %+v", body, f)
		}
	}
}
