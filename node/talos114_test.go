package node_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// What Talos refuses in a 1.14 config is refused here too, wherever it
// sits: the first newer field of an earlier document (ResolverConfig's
// hostDNS in every generated config) used to end the local check there, so
// Newt's ExtensionServiceConfig twice, as v1alpha2, or under a misspelt
// kind passed inventory check and counted as Newt's document.
func TestLoadConfig114RefusesWhatTalosRefusesAfterNewerFields(t *testing.T) {
	base := string(readTestdata(t, "talos114/valid/worker.yaml"))
	esc := func(apiVersion, kind, key string) string {
		return "\n---\napiVersion: " + apiVersion + "\nkind: " + kind + "\nname: newt\n" + key + ":\n  - NEWT_ID=abc\n"
	}
	good := esc("v1alpha1", "ExtensionServiceConfig", "environment")
	for _, c := range []struct {
		name, data, want string
	}{
		{"twice", base + good + good, `"ExtensionServiceConfig" document named "newt" appears twice`},
		{"v1alpha2", base + esc("v1alpha2", "ExtensionServiceConfig", "environment"), `apiVersion "v1alpha2" is not one Talos knows for this kind (it is v1alpha1)`},
		{"misspelt kind", base + esc("v1alpha1", "ExtensionServiceConfg", "environment"), `kind "ExtensionServiceConfg" is not a Talos config document (did you mean ExtensionServiceConfig?)`},
		{"v1.13 config, twice", string(readTestdata(t, "worker-newt-esc.yaml")) + good, `document named "newt" appears twice`},
	} {
		cfg, err := node.LoadConfig([]byte(c.data))
		if err == nil {
			t.Errorf("%s: loaded (services %v, warnings %q), want %q", c.name, cfg.ExtensionServices, cfg.Warnings, c.want)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	// A misspelt key is named in its own document, not the first newer
	// field's; the documents 1.14 added are still listed as the node's.
	cfg, err := node.LoadConfig([]byte(base + esc("v1alpha1", "ExtensionServiceConfig", "enviroment")))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(cfg.Warnings, "\n"); !strings.Contains(w, `("ExtensionServiceConfig"): unknown field(s) "enviroment"`) || strings.Contains(w, "hostDNS") {
		t.Errorf("warnings: %s", w)
	}
	if len(cfg.Unchecked) != 2 {
		t.Errorf("unchecked: %q", cfg.Unchecked)
	}
	// The same config with the document right loads clean.
	if cfg, err := node.LoadConfig([]byte(base + good)); err != nil || len(cfg.Warnings) != 0 || !slices.Equal(cfg.ExtensionServices, []string{"newt"}) {
		t.Errorf("a right config: %v %+v", err, cfg)
	}
}

// The configs talosctl gen config v1.14 writes load: every 1.14 kind is
// known (passed through, listed as not checked locally), v1.13's checks pass
// on the rest, and no warning about machinery v1.13 appears.
func TestLoadConfigGenerated114(t *testing.T) {
	for _, name := range []string{"valid/controlplane.yaml", "valid/worker.yaml", "user/controlplane.yaml", "user/worker.yaml"} {
		cfg, err := node.LoadConfig(readTestdata(t, "talos114/"+name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !cfg.Talos114 || cfg.UnattendedInstall == 0 || cfg.MachineInstall {
			t.Errorf("%s: Talos114 %v UIC %d machine.install %v", name, cfg.Talos114, cfg.UnattendedInstall, cfg.MachineInstall)
		}
		all := strings.Join(append(cfg.Warnings, cfg.Unchecked...), "\n")
		for _, bad := range []string{"not registered", "local validation", "unknown field", "install instructions", "endpoint is required"} {
			if strings.Contains(all, bad) {
				t.Errorf("%s: %q in\n%s", name, bad, all)
			}
		}
		for _, want := range []string{`"KubeletConfig", "KubeNetworkConfig"`, `not checked locally (newer than Talos machinery v1.13)`, `"ResolverConfig"): not checked locally (has fields newer`} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: %q missing in\n%s", name, want, all)
			}
		}
	}
}

// The local check per Talos version: on the generated 1.14 configs no
// "falls back to the generic installer" and never a fix into
// .machine.install; the rc.1 rules are warnings that say who refuses them;
// the conflict blocks, naming the document.
func TestInspect114(t *testing.T) {
	insp := func(file string, opts node.InspectOptions) map[string]node.Finding {
		t.Helper()
		return byCode(node.InspectWith(loadTestConfig(t, file), opts))
	}
	for _, file := range []string{"talos114/valid/worker.yaml", "talos114/valid/controlplane.yaml"} {
		for _, f := range insp(file, node.InspectOptions{TalosVersion: "v1.14.5"}) {
			if f.Severity != node.SeverityInfo {
				t.Errorf("%s: %+v", file, f)
			}
		}
	}
	// An empty installer image on a 1.14 node, even with a legacy config
	// without install section: 1.14 installs the boot entry's installer.
	if _, ok := insp("talos114/valid/worker.yaml", node.InspectOptions{})[node.CodeInstallImageMissing]; ok {
		t.Error("empty installer.image in a 1.14 config reported as falling back to the generic installer")
	}

	fs := insp("talos114/user/worker.yaml", node.InspectOptions{Booted: booted(workerSchematic()), Role: "worker", InstallerPatch: "talos/installer-worker.yaml"})
	for _, code := range []string{node.CodeUICNoDiskSelector, node.CodeControlPlaneOnlyDocs} {
		f, ok := fs[code]
		if !ok || f.Severity != node.SeverityWarning || !strings.Contains(f.Message, "Talos v1.14.0-rc.1") || !strings.Contains(f.Message, "the node's dry run decides") {
			t.Errorf("%s: %+v", code, f)
		}
	}
	if f := fs[node.CodeUICNoDiskSelector]; !strings.Contains(f.Fix, "talos/installer-worker.yaml") {
		t.Errorf("the fix does not name the user's installer patch: %q", f.Fix)
	}
	if f := fs[node.CodeControlPlaneOnlyDocs]; !strings.Contains(f.Message, `"KubeProxyConfig"`) {
		t.Errorf("kinds not named: %q", f.Message)
	}
	for _, f := range fs {
		if f.Severity == node.SeverityError {
			t.Errorf("the user's worker.yaml on the worker image is blocked: %+v", f)
		}
	}

	// Installer advice on a 1.14 config goes to the UnattendedInstallConfig,
	// naming the patch.
	m, ok := insp("talos114/user/worker.yaml", node.InspectOptions{Booted: booted(cpSchematic()), InstallerPatch: "talos/installer-worker.yaml"})[node.CodeInstallImageMismatch]
	if !ok || !strings.Contains(m.Fix, "installer.image of the UnattendedInstallConfig (document 4)") || !strings.Contains(m.Fix, "talos/installer-worker.yaml") || strings.Contains(m.Fix, "machine.install") {
		t.Errorf("mismatch fix on 1.14: %+v", m)
	}

	c, ok := insp("worker-v114.yaml", node.InspectOptions{})[node.CodeInstallConflict]
	if !ok || c.Severity != node.SeverityError || !strings.Contains(c.Message, "UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)") ||
		!strings.Contains(c.Fix, "delete the install: section under machine: in document 1 (v1alpha1)") {
		t.Errorf("conflict: %+v", c)
	}
}

// A worker config that says "join" or leaves machine.type out is a worker
// to Talos (machine.go ParseType), so the control-plane-only documents are
// its warning too, in a worker's words.
func TestInspectControlPlaneOnlyDocsOnEveryWorkerSpelling(t *testing.T) {
	worker := readTestdata(t, "talos114/user/worker.yaml")
	for name, data := range map[string][]byte{
		"join":    bytes.Replace(worker, []byte("type: worker"), []byte("type: join"), 1),
		"no type": regexp.MustCompile(`(?m)^    type: worker.*\n`).ReplaceAll(worker, nil),
	} {
		c, err := node.LoadConfig(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, ok := byCode(node.InspectWith(c, node.InspectOptions{}))[node.CodeControlPlaneOnlyDocs]
		if !ok || !strings.Contains(f.Message, "this worker config has") || !strings.Contains(f.Message, `"KubeProxyConfig"`) {
			t.Errorf("%s: %+v", name, f)
		}
	}
}

// The empty schematic's installer (talosctl 1.14's default) is the generic
// installer, as ghcr.io/siderolabs/installer is.
func TestInspectEmptySchematicInstallerIsGeneric(t *testing.T) {
	cfg := bytes.Replace(readTestdata(t, "talos114/valid/worker.yaml"), []byte("installer: {}"),
		[]byte("installer:\n    image: factory.talos.dev/metal-installer/"+factory.EmptySchematicID+":v1.14.5"), 1)
	c, err := node.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byCode(node.InspectWith(c, node.InspectOptions{Booted: booted(workerSchematic())}))[node.CodeInstallImageGeneric]; !ok {
		t.Error("the empty schematic's installer is not reported as generic")
	}
}

// talos114Valid is Talos v1.14's verdict on data (testkit.TalosctlValidate:
// a talosctl v1.14 on PATH; skipped without one).
func talos114Valid(t *testing.T, data []byte) string { return testkit.TalosctlValidate(t, data) }

// docRange is the byte range of document idx (1-based) of a multi-doc file.
func docRange(t *testing.T, data []byte, idx int) (int, int) {
	t.Helper()
	starts := []int{0}
	for _, m := range regexp.MustCompile(`(?m)^---\n`).FindAllIndex(data, -1) {
		starts = append(starts, m[1])
	}
	if idx > len(starts) {
		t.Fatalf("no document %d", idx)
	}
	end := len(data)
	if idx < len(starts) {
		end = starts[idx] - 4
	}
	return starts[idx-1], end
}

var (
	fixImage    = regexp.MustCompile(`set installer\.image of the UnattendedInstallConfig \(document (\d+)\)[^:]* to (\S+), and`)
	fixSelector = regexp.MustCompile(`(?s)add to the UnattendedInstallConfig \(document (\d+)\).*?:\n(provisioning:\n.*)$`)
	fixDelete   = regexp.MustCompile(`delete the "(\w+)" document`)
	fixInstall  = regexp.MustCompile(`delete the install: section under machine: in document (\d+)`)
)

// applyFix applies a printed fix to data, as a user following it would.
func applyFix(t *testing.T, data []byte, f node.Finding) []byte {
	t.Helper()
	cfg, err := node.LoadConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case fixImage.MatchString(f.Fix):
		m := fixImage.FindStringSubmatch(f.Fix)
		re := regexp.MustCompile(`(?m)^installer:.*\n(    image: .*\n)?`)
		return re.ReplaceAll(data, []byte("installer:\n    image: "+m[2]+"\n"))
	case fixSelector.MatchString(f.Fix):
		m := fixSelector.FindStringSubmatch(f.Fix)
		sel := strings.TrimPrefix(m[2], "provisioning:\n")
		return bytes.Replace(data, []byte("\nprovisioning:\n"), []byte("\nprovisioning:\n"+sel), 1)
	case fixDelete.MatchString(f.Fix):
		kind := fixDelete.FindStringSubmatch(f.Fix)[1]
		for i, k := range cfg.Kinds {
			if k == kind {
				s, e := docRange(t, data, i+1)
				return append(append([]byte(nil), data[:s-4]...), data[e:]...)
			}
		}
		t.Fatalf("no %s document", kind)
	case fixInstall.MatchString(f.Fix):
		re := regexp.MustCompile(`(?m)^    install:\n(        .*\n)*`)
		return re.ReplaceAll(data, nil)
	}
	t.Fatalf("fix not understood by the test: %q", f.Fix)
	return nil
}

// Every fix the tool prints for a 1.14 config, applied to the file, gives
// a config Talos v1.14.0-rc.1 accepts (talosctl validate, where there is one).
func TestFixes114ValidateWithOracle(t *testing.T) {
	withInstall := bytes.Replace(readTestdata(t, "talos114/valid/worker.yaml"), []byte("\nmachine:\n"), []byte("\nmachine:\n    install:\n        disk: /dev/sda\n"), 1)
	for _, tc := range []struct {
		name string
		data []byte
		opts node.InspectOptions
	}{
		{"user worker on the worker image", readTestdata(t, "talos114/user/worker.yaml"), node.InspectOptions{Booted: booted(workerSchematic()), Role: "worker", InstallerPatch: "talos/installer-worker.yaml"}},
		{"user worker on the newt image (installer mismatch)", readTestdata(t, "talos114/user/worker.yaml"), node.InspectOptions{Booted: booted(cpSchematic())}},
		{"user controlplane", readTestdata(t, "talos114/user/controlplane.yaml"), node.InspectOptions{Booted: booted(cpSchematic()), Role: "controlplane"}},
		{"valid worker plus machine.install", withInstall, node.InspectOptions{Booted: booted(workerSchematic())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data
			fixed := 0
			for _, f := range node.InspectWith(loadTestConfig2(t, data), tc.opts) {
				if f.Severity == node.SeverityInfo || f.Fix == "" || f.Code == node.CodeExtensionConfigMissing {
					continue
				}
				if strings.Contains(f.Fix, "machine.install.image") {
					t.Errorf("1.14 fix into .machine.install: %q", f.Fix)
				}
				data = applyFix(t, data, f)
				fixed++
			}
			if fixed == 0 {
				t.Fatal("no fix printed")
			}
			if got := talos114Valid(t, data); got != "valid" {
				t.Errorf("after %d fixes Talos 1.14 says %s", fixed, got)
			}
		})
	}
}

func loadTestConfig2(t *testing.T, data []byte) *node.Config {
	t.Helper()
	cfg, err := node.LoadConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Generated 1.14 configs through node.Apply to fake 1.14 nodes booted with
// the matching images: accepted (dry run and apply), received byte for
// byte; the rc.1 node refuses the user's files with its own message; no
// fragment of the PKI or the Newt secret in any reply.
func TestApplyGenerated114(t *testing.T) {
	for _, tc := range []struct {
		file   string
		sc     func() *nodetest.Options
		refuse string // with RC1Rules
	}{
		{"talos114/valid/controlplane.yaml", func() *nodetest.Options { return &nodetest.Options{Schematic: cpSchematic()} }, ""},
		{"talos114/valid/worker.yaml", func() *nodetest.Options { return &nodetest.Options{Schematic: workerSchematic()} }, ""},
		{"talos114/user/controlplane.yaml", func() *nodetest.Options { return &nodetest.Options{Schematic: cpSchematic()} }, "provisioning.volumeSelector.match is required"},
		{"talos114/user/worker.yaml", func() *nodetest.Options { return &nodetest.Options{Schematic: workerSchematic()} }, "only allowed on control plane machines: [KubeProxyConfig]"},
	} {
		data := readTestdata(t, tc.file)
		frags, err := nodetest.ConfigSecretFragments(data)
		if err != nil {
			t.Fatal(err)
		}
		srv := nodetest.Start(t, *tc.sc())
		var out []string
		for _, dry := range []bool{true, false} {
			res, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: data, DryRun: dry})
			if err != nil {
				t.Fatalf("%s (dry run %v): %v", tc.file, dry, err)
			}
			out = append(out, res.ModeDetails, strings.Join(res.Warnings, "\n"))
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || !bytes.Equal(reqs[0].Config, data) || !bytes.Equal(reqs[1].Config, data) {
			t.Fatalf("%s: not received byte for byte", tc.file)
		}
		opts := tc.sc()
		opts.RC1Rules = true
		rc1 := nodetest.Start(t, *opts)
		_, err = node.Apply(context.Background(), node.ApplyOptions{Endpoint: rc1.Addr(), Config: data})
		if tc.refuse == "" && err != nil || tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)) {
			t.Errorf("%s on an rc.1 node: %v, want refusal %q", tc.file, err, tc.refuse)
		}
		if err != nil {
			out = append(out, err.Error())
		}
		all := strings.Join(out, "\n")
		for _, f := range frags {
			if strings.Contains(all, f) {
				t.Fatalf("%s: secret fragment %q in the node's replies", tc.file, f)
			}
		}
	}
}

// Probe reads ImageFactorySchematics on Talos 1.14: which factory built the
// image; older nodes have none.
func TestProbeReadsImageFactorySchematics(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: cpSchematic(), FactoryURL: "http://127.0.0.1:8080"})
	n, err := node.Probe(context.Background(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if n.Factory == nil || n.Factory.SchematicID != srv.SchematicID() || n.Factory.APIURL != "http://127.0.0.1:8080" || n.Factory.String() != "http://127.0.0.1:8080 (Image Factory)" {
		t.Fatalf("factory %+v", n.Factory)
	}
	old := nodetest.Start(t, nodetest.Options{Schematic: cpSchematic(), TalosVersion: "v1.13.4"})
	if n, err := node.Probe(context.Background(), old.Addr()); err != nil || n.Factory != nil || n.Booted == nil {
		t.Fatalf("1.13 node: %+v %v", n, err)
	}
}

// talosflash schematic --installer-yaml for Talos 1.14 is a patch that
// talosctl gen config v1.14 can take: the whole UnattendedInstallConfig
// (a strategic merge of one holding only installer.image drops the
// generated provisioning, and .machine.install beside it is refused). In
// the generated config it gives the role's installer, no installer
// finding, and a config Talos v1.14.0-rc.1 accepts.
func TestInstallerPatch114(t *testing.T) {
	for role, s := range map[string]*schematic.Schematic{"controlplane": cpSchematic(), "worker": workerSchematic()} {
		t.Run(role, func(t *testing.T) {
			p, err := factory.FindProfile(factory.BuiltinProfiles(), role)
			if err != nil {
				t.Fatal(err)
			}
			p.TalosVersion = "v1.14.5"
			patch, err := factory.InstallerPatch(p, "")
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(patch, []byte("\nmachine:")) {
				t.Fatalf("a 1.14 patch sets .machine.install, which the node refuses beside the UnattendedInstallConfig:\n%s", patch)
			}
			// What the strategic merge makes of it: the generated document
			// replaced by the patch's (machinery v1.13 cannot merge a 1.14 kind).
			docs := strings.Split(string(readTestdata(t, "talos114/valid/"+role+".yaml")), "\n---\n")
			replaced := 0
			for i, d := range docs {
				if strings.Contains(d, "\nkind: UnattendedInstallConfig\n") {
					docs[i], replaced = strings.TrimSuffix(string(patch), "\n"), replaced+1
				}
			}
			if replaced != 1 {
				t.Fatalf("%d UnattendedInstallConfig documents in the fixture", replaced)
			}
			data := []byte(strings.Join(docs, "\n---\n"))
			cfg := loadTestConfig2(t, data)
			id, _ := factory.SchematicID(s)
			if want := factory.NewInstallerRef("factory.talos.dev", id, "v1.14.5").String(); cfg.InstallImage != want || !cfg.UICDiskSelector {
				t.Fatalf("installer %q (want %s), disk selector %v", cfg.InstallImage, want, cfg.UICDiskSelector)
			}
			for _, f := range node.InspectWith(cfg, node.InspectOptions{Booted: booted(s), Role: node.Role(role)}) {
				if strings.Contains(string(f.Code), "install") {
					t.Errorf("finding on the patched config: %+v", f)
				}
			}
			if got := talos114Valid(t, data); got != "valid" {
				t.Errorf("Talos 1.14 says %s", got)
			}
		})
	}
}
