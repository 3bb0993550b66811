package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
)

func TestInventoryInitThenCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "talosflash.yaml")

	code, stdout, stderr := cliRun(t, "inventory", "init", file)
	if code != contract.ExitOK || !strings.Contains(stdout, "EXAMPLE addresses") || stderr != "" {
		t.Fatalf("init: %d %q %q", code, stdout, stderr)
	}

	// Never over an existing file without --force.
	code, _, stderr = cliRun(t, "inventory", "init", file)
	if code != contract.ExitUsage || !strings.Contains(stderr, "exists") || !strings.Contains(stderr, "--force") {
		t.Fatalf("second init: %d %q", code, stderr)
	}

	// The configs it names do not exist yet: each reported with its line.
	code, _, stderr = cliRun(t, "inventory", "check", file)
	if code != contract.ExitConfig || strings.Count(stderr, "not found") != 6 || !strings.Contains(stderr, "talosflash.yaml:") ||
		!strings.Contains(stderr, "talosctl gen config") || !strings.Contains(stderr, "6 problems") {
		t.Fatalf("check without configs: %d\n%s", code, stderr)
	}

	if err := os.MkdirAll(filepath.Join(dir, "talos"), 0o700); err != nil {
		t.Fatal(err)
	}

	// Real configs (test PKI), without a static hostname: the card sets it,
	// their endpoint cp-1's; the installer files as `schematic
	// --installer-yaml` writes them (inventory check cross-checks them).
	for _, f := range []string{"controlplane.yaml", "worker.yaml", "installer-controlplane.yaml", "installer-worker.yaml"} {
		var body []byte
		if role, ok := strings.CutPrefix(strings.TrimSuffix(f, ".yaml"), "installer-"); ok {
			pr, err := factory.FindProfile(factory.BuiltinProfiles(), role)
			if err != nil {
				t.Fatal(err)
			}

			if body, err = factory.InstallerPatch(pr, ""); err != nil {
				t.Fatal(err)
			}
		} else {
			b := testkit.Testdata(t, f)

			s := strings.Replace(string(b), "hostname:", "# hostname:", 1)
			body = []byte(strings.Replace(s, "https://192.168.1.10:6443", "https://192.168.1.20:6443", 1))
		}

		if err := os.WriteFile(filepath.Join(dir, "talos", f), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Flags after the file work too.
	code, stdout, stderr = cliRun(t, "inventory", "check", file, "--json")
	if code != contract.ExitOK || stderr != "" {
		t.Fatalf("check: %d %q", code, stderr)
	}

	var out inventoryJSON
	if err := json.Unmarshal(answer(t, stdout, "inventory"), &out); err != nil {
		t.Fatal(err)
	}

	if !out.OK || len(out.Nodes) != 3 || out.Nodes[1].Hostname != "worker-1" || out.Nodes[1].Address != "192.168.1.21/24" || out.Nodes[1].Interface != "end0" {
		t.Fatalf("json %+v", out)
	}

	code, stdout, _ = cliRun(t, "inventory", "check", file)
	if code != contract.ExitOK || !strings.Contains(stdout, "3 nodes, no problems") || !strings.Contains(stdout, "worker-2  worker") {
		t.Fatalf("table: %d\n%s", code, stdout)
	}
}

func TestInventoryCheckProblems(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "inv.yaml")
	body := "nodes:\n  - hostname: w1\n    role: wroker\n    address: 10.0.1.5/24\n    gateway: 10.0.0.1\n"

	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := cliRun(t, "inventory", "check", file)
	for _, want := range []string{
		file + `:3: node w1: unknown role "wroker" (did you mean worker?)`,
		file + ":5: node w1: gateway 10.0.0.1 is outside the address's subnet 10.0.1.0/24",
		"talosflash: " + file + ": 2 problems",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	if code != contract.ExitConfig {
		t.Errorf("exit %d", code)
	}

	code, stdout, _ := cliRun(t, "inventory", "check", "--json", file)

	var out inventoryJSON
	if err := json.Unmarshal(answer(t, stdout, "inventory"), &out); err != nil || out.OK || len(out.Problems) != 2 || out.Problems[0].Line != 3 || code != contract.ExitConfig {
		t.Fatalf("json: %d %v %+v", code, err, out)
	}

	code, _, stderr = cliRun(t, "inventory", "check", filepath.Join(dir, "none.yaml"))
	if code != contract.ExitUsage || !strings.Contains(stderr, "inventory init") { // a missing file is bad input
		t.Fatalf("missing file: %d %q", code, stderr)
	}

	if code, _, _ := cliRun(t, "inventory", "frob"); code != contract.ExitUsage {
		t.Fatalf("unknown subcommand: %d", code)
	}

	if code, _, _ := cliRun(t, "inventory", "check", "a.yaml", "b.yaml"); code != contract.ExitUsage {
		t.Fatalf("two files: %d", code)
	}
}

// A missing inventory file is bad input, exit 2 with the fix, in every
// command that reads one (inventory check said 7, "invalid config").
func TestMissingInventoryIsUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "talosflash.yaml")
	for _, args := range [][]string{
		{"inventory", "check", missing},
		{"apply", "--inventory", missing, "--wait", "1s"},
		{"--flash", "--inventory", missing, "--hostname", "worker-1", "--device", filepath.Join(t.TempDir(), "card.img"), "--yes", "--create-file", "--factory", "http://127.0.0.1:1"},
	} {
		code, _, stderr := cliRun(t, args...)
		if code != contract.ExitUsage || !strings.Contains(stderr, "talosflash inventory init") {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// inventory check renders the cross-checks: a mismatch as a problem (exit
// 7, file:line and the fix), what it cannot check as a note (exit 0).
func TestInventoryCheckCrossChecks(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	worker := filepath.Join(dir, "talos", "worker.yaml")
	b, err := os.ReadFile(worker)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		endpoint string
		code     int
		want     string
	}{
		{"https://127.0.0.22:6443", contract.ExitConfig, "worker.yaml:"},
		{"https://k8s.home.arpa:6443", contract.ExitOK, "note: "},
	} {
		body := strings.ReplaceAll(string(b), "https://127.0.0.21:6443", c.endpoint)
		if err := os.WriteFile(worker, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}

		code, stdout, stderr := cliRun(t, "inventory", "check", inv)
		if code != c.code || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, c.endpoint) {
			t.Fatalf("endpoint %s: exit %d, want %d with %q:\n%s%s", c.endpoint, code, c.code, c.want, stdout, stderr)
		}

		code, stdout, _ = cliRun(t, "inventory", "check", inv, "--json")
		var out inventoryJSON
		if err := json.Unmarshal(answer(t, stdout, "inventory"), &out); err != nil {
			t.Fatal(err)
		}

		if code != c.code || len(out.Problems)+len(out.Notes) != 1 {
			t.Fatalf("endpoint %s --json: exit %d, %+v", c.endpoint, code, out)
		}
	}
}

// Newt's ExtensionServiceConfig written as Talos refuses it (twice, as
// v1alpha2) is not Newt's document: inventory check refuses the control
// plane's config with its line, as the node would refuse it at apply.
func TestInventoryCheckRefusesAnExtensionServiceConfigTalosRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(string) string
		want string
	}{
		{"v1alpha2", func(s string) string {
			return strings.Replace(s, "apiVersion: v1alpha1\nkind: ExtensionServiceConfig", "apiVersion: v1alpha2\nkind: ExtensionServiceConfig", 1)
		}, `apiVersion "v1alpha2" is not one Talos knows`},
		{"twice", func(s string) string {
			return s + "\n---\n" + s[strings.Index(s, "apiVersion: v1alpha1\nkind: ExtensionServiceConfig"):]
		}, `document named "newt" appears twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			inv := testkit.Inventory{Configs: true}.Write(t, dir)
			cp := filepath.Join(dir, "talos", "controlplane.yaml")
			b, err := os.ReadFile(cp)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cp, []byte(c.edit(string(b))), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := cliRun(t, "inventory", "check", inv)
			if code != contract.ExitConfig || !strings.Contains(stderr, "controlplane.yaml") || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s%s", code, contract.ExitConfig, c.want, stdout, stderr)
			}
		})
	}
}
