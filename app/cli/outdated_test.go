package cli

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
)

func TestOutdatedCommand(t *testing.T) {
	fac := factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6", "v1.15.0")
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
	file := filepath.Join(dir, "talos", "installer-controlplane.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := append([]byte("# bump me with talosflash outdated --write\n"), patch...)
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	generic := filepath.Join(dir, "old-patch.yaml")
	if err := os.WriteFile(generic, []byte("machine:\n  install:\n    image: ghcr.io/siderolabs/installer:v1.14.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := cliRun(t, "outdated", dir, "--factory", fac.URL)
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{":v1.14.5 -> v1.14.6 (latest v1.15.0)", "siderolabs/newt v1.14.5 -> v1.14.6", "can be updated: run with --write"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "old-patch.yaml:3 uses the stock installer") {
		t.Errorf("stock installer not flagged:\n%s", stderr)
	}
	if got, _ := os.ReadFile(file); string(got) != string(orig) {
		t.Fatal("the file changed without --write")
	}

	code, stdout, stderr = cliRun(t, "outdated", "--factory", fac.URL, "--write", "--json", dir)
	var res []outdatedJSON
	if code != contract.ExitOK || json.Unmarshal(answer(t, stdout, "outdated"), &res) != nil || len(res) != 1 || !res[0].Written || res[0].Target != "v1.14.6" {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	got, _ := os.ReadFile(file)
	if want := strings.Replace(string(orig), ":v1.14.5\n", ":v1.14.6\n", 1); string(got) != want {
		t.Fatalf("rewritten file:\n%s\nwant:\n%s", got, want)
	}
	code, stdout, _ = cliRun(t, "outdated", dir, "--factory", fac.URL)
	if code != contract.ExitOK || !strings.Contains(stdout, "newest of its minor; latest v1.15.0") {
		t.Fatalf("after write: exit %d\n%s", code, stdout)
	}
	for _, to := range []string{"newest", "v1.99.0"} {
		if code, _, stderr := cliRun(t, "outdated", dir, "--factory", fac.URL, "--to", to); code != contract.ExitUsage {
			t.Errorf("--to %s: exit %d %s", to, code, stderr)
		}
	}
}
