package cli

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// outdated also says what the user bumps by hand for the target Talos:
// each config's Kubernetes version against the release's supported range
// (Talos 1.14: 1.32.0 to 1.37.x), and Newt's version on the factory.
func TestOutdatedKubernetesAndNewtVersions(t *testing.T) {
	fac := factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6")
	u, _ := url.Parse(fac.URL)
	dir := t.TempDir()
	cp, err := factory.FindProfile(factory.BuiltinProfiles(), "controlplane")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fac.AddSchematic(cp.Schematic()); err != nil {
		t.Fatal(err)
	}
	patch, err := factory.InstallerPatch(cp, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, dir, "talos/installer-controlplane.yaml", string(patch))
	testkit.WriteFile(t, dir, "talos/controlplane.yaml", string(testkit.Testdata(t, "talos114/valid/controlplane.yaml")))
	testkit.WriteFile(t, dir, "talos/old-worker.yaml", "version: v1alpha1\nmachine:\n  type: worker\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v1.31.4\n")

	code, stdout, stderr := cliRun(t, "outdated", dir, "--factory", fac.URL)
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		filepath.Join(dir, "talos/controlplane.yaml") + ":169  Kubernetes v1.37.1 (KubeletConfig image): supported by Talos v1.14.6 (1.32.0 to 1.37.x)",
		filepath.Join(dir, "talos/old-worker.yaml") + ":5  Kubernetes v1.31.4 (machine.kubelet.image): NOT supported by Talos v1.14.6 (it supports 1.32.0 to 1.37.x)",
		"siderolabs/newt for Talos v1.14.6 on the factory: v1.14.6",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = cliRun(t, "outdated", dir, "--factory", fac.URL, "--json")
	v := answerMap(t, stdout, "versions")
	docRowHas(t, "| `outdated --json` (versions) |", v)
	if code != contract.ExitOK || v["talos"] != "v1.14.6" || len(v["kubernetes"].([]any)) != 2 || len(v["extensions"].([]any)) != 1 {
		t.Fatalf("versions line: %v", v)
	}

}
