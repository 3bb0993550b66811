package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
)

var subcommands = []string{"flash", "schematic", "profiles", "devices", "nodes", "apply", "bootstrap", "status", "kubeconfig", "patch", "upgrade", "etcd", "outdated", "inventory", "card"}

// `flash -h` used to be a bare "Usage of flash:" listing -elevated.
func TestEverySubcommandHasUsage(t *testing.T) {
	for _, cmd := range subcommands {
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "--help"}, {"help", cmd}} {
			code, stdout, stderr := cliRun(t, args...)
			if code != contract.ExitOK || stderr != "" {
				t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
			}
			for _, want := range []string{"Usage: talosflash ", "Flags:\n", "Example:\n  talosflash "} {
				if !strings.Contains(stdout, want) {
					t.Errorf("%v: usage lacks %q:\n%s", args, want, stdout)
				}
			}
			if strings.Contains(stdout, "elevated") || strings.Contains(stdout, "insecure (") || strings.Contains(stdout, "Usage of") {
				t.Errorf("%v: usage shows an internal flag or the bare default:\n%s", args, stdout)
			}
		}
	}
	code, stdout, _ := cliRun(t, "--help")
	for _, cmd := range append(subcommands, "version", "gui") {
		if code != contract.ExitOK || !strings.Contains(stdout, "\n  "+cmd) {
			t.Errorf("talosflash --help does not list %s:\n%s", cmd, stdout)
		}
	}
}

// Every public flag of a command is in its usage, with its shorthand.
func TestUsageListsPublicFlags(t *testing.T) {
	code, stdout, _ := cliRun(t, "apply", "-h")
	if code != contract.ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-n, --node IP", "-f, --file FILE", "--dry-run ", "--timeout DURATION", "(default auto)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("apply -h lacks %q:\n%s", want, stdout)
		}
	}
	_, stdout, _ = cliRun(t, "flash", "-h")
	for _, want := range []string{"--allow-loop", "--device DEVICE", "--force-non-removable", "--no-verify"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("flash -h lacks %q", want)
		}
	}
	for _, line := range strings.Split(stdout, "\n") {
		if len(line) > 80 && !strings.HasPrefix(line, "Usage:") && !strings.HasPrefix(line, "  talosflash ") {
			t.Errorf("flash -h line longer than 80 columns: %q", line)
		}
	}
}

// Hidden flags still work: the elevated child is started with --elevated.
func TestHiddenFlagsStillParse(t *testing.T) {
	fs := newFlagSet("flash", Env{})
	elevated := fs.Bool("elevated", false, "internal")
	if err := parseFlags(fs, []string{"--elevated"}); err != nil || !*elevated {
		t.Fatalf("--elevated: %v, set %v", err, *elevated)
	}
}

// A bad flag is one error line naming the help, not the flag package's
// message plus the whole usage.
func TestBadFlagIsOneLine(t *testing.T) {
	code, stdout, stderr := cliRun(t, "flash", "--bogus")
	if code != contract.ExitUsage || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "talosflash flash -h") {
		t.Fatalf("stderr %q", stderr)
	}
}

func TestUnknownCommandIsOneLine(t *testing.T) {
	code, stdout, stderr := cliRun(t, "frobnicate")
	if code != contract.ExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "talosflash --help") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// `schematic --installer-yaml` prints the role's talos/installer-<role>.yaml:
// a patch that `talosflash --installer-file` (and outdated) read back to the
// same installer, on the configured factory's registry.
func TestSchematicInstallerYAML(t *testing.T) {
	dir := t.TempDir()
	for _, role := range []string{"controlplane", "worker"} {
		code, stdout, stderr := cliRun(t, "schematic", "--role", role, "--installer-yaml", "--factory", "http://127.0.0.1:5005")
		if code != contract.ExitOK {
			t.Fatalf("%s: exit %d: %s", role, code, stderr)
		}
		inf, err := factory.ParseInstallerFile([]byte(stdout))
		if err != nil {
			t.Fatalf("%s: the patch does not parse back: %v\n%s", role, err, stdout)
		}
		p, _ := factory.FindProfile(factory.BuiltinProfiles(), role)
		id, _ := p.SchematicID()
		if inf.Ref.SchematicID != id || inf.Ref.Registry != "127.0.0.1:5005" || inf.Ref.Version != factory.DefaultTalosVersion || inf.Schematic == nil {
			t.Fatalf("%s: installer %+v, want %s on 127.0.0.1:5005", role, inf.Ref, id)
		}
		file := filepath.Join(dir, "installer-"+role+".yaml")
		if err := os.WriteFile(file, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr = cliRun(t, "schematic", "--installer-file", file, "--json", "--factory", "http://127.0.0.1:5005")
		if code != contract.ExitOK || !strings.Contains(stdout, id) {
			t.Fatalf("%s: reading the file back: exit %d %s %s", role, code, stdout, stderr)
		}
	}
	if code, _, _ := cliRun(t, "schematic", "--installer", "factory.talos.dev/metal-installer/"+strings.Repeat("a", 64)+":v1.14.5", "--installer-yaml"); code != contract.ExitUsage {
		t.Fatalf("--installer-yaml without --role: exit %d, want %d", code, contract.ExitUsage)
	}
}

// `schematic` shows the image `--flash` downloads (the default format), and
// offers no --image (a local file has no schematic; -h used to list it).
func TestSchematicFormatAndFlags(t *testing.T) {
	code, stdout, stderr := cliRun(t, "schematic", "--role", "worker", "--json")
	if code != contract.ExitOK || !strings.Contains(stdout, "metal-arm64.raw.zst") {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	code, stdout, _ = cliRun(t, "schematic", "--role", "worker", "--format", "xz", "--json")
	if code != contract.ExitOK || !strings.Contains(stdout, "metal-arm64.raw.xz") {
		t.Fatalf("--format xz: exit %d: %s", code, stdout)
	}
	if code, stdout, _ := cliRun(t, "schematic", "-h"); code != contract.ExitOK || strings.Contains(stdout, "--image") {
		t.Fatalf("schematic -h lists --image:\n%s", stdout)
	}
	if code, _, _ := cliRun(t, "schematic", "--image", "x.raw"); code != contract.ExitUsage {
		t.Fatalf("schematic --image: exit %d, want %d", code, contract.ExitUsage)
	}
}

// A mistyped flag or command names the one it is close to; an internal
// flag is never suggested, and a word close to nothing gets no guess.
func TestTyposSuggestTheClosest(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"flash", "--rol", "worker"}, "did you mean --role?"},
		{[]string{"nodes", "--jsn"}, "did you mean --json?"},
		{[]string{"flsh"}, `unknown command "flsh"; did you mean flash?`},
		{[]string{"flash", "--elevatd"}, ""},
		{[]string{"nodes", "--zzzzzz"}, ""},
	} {
		code, _, stderr := cliRun(t, c.args...)
		if code != contract.ExitUsage {
			t.Errorf("%v: exit %d", c.args, code)
		}
		if c.want == "" && strings.Contains(stderr, "did you mean") || c.want != "" && !strings.Contains(stderr, c.want) {
			t.Errorf("%v: %s", c.args, stderr)
		}
	}
}

// A flag is said the way the docs write it, with two dashes, whether it
// was typed with one or two (the flag package echoes one: "-hostnme").
func TestFlagErrorsSayTwoDashes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"flash", "-hostnme", "x"}, "flash: unknown flag --hostnme; did you mean --hostname? (see: talosflash flash -h)"},
		{[]string{"flash", "--hostnme", "x"}, "flash: unknown flag --hostnme; did you mean --hostname?"},
		{[]string{"nodes", "--timeout", "soon"}, `nodes: --timeout "soon": `},
		{[]string{"nodes", "-json=maybe"}, `nodes: --json "maybe": want true or false`},
		{[]string{"flash", "--device"}, "flash: --device needs a value"},
		{[]string{"version", "--jsn"}, "version: unknown flag --jsn; did you mean --json?"},
	} {
		code, _, stderr := cliRun(t, c.args...)
		if code != contract.ExitUsage || !strings.Contains(stderr, c.want) || regexp.MustCompile(`[^-]-[a-z]{3,}`).MatchString(strings.ReplaceAll(stderr, "talosflash", "")) {
			t.Errorf("%v: exit %d: %s (want %q)", c.args, code, stderr, c.want)
		}
	}
}

// A usage says each default once (a flag whose text says it in words
// showed "(default: until interrupted) (default 0s)"), and upgrade -h
// lists the rolling upgrade's flags too (they were only seen with
// upgrade --inventory X -h).
func TestUsageDefaultsOnceAndUpgradeInventoryFlags(t *testing.T) {
	twice := regexp.MustCompile(`\(default[^)]*\)\s+\(default`)
	for _, cmd := range subcommands {
		_, stdout, _ := cliRun(t, cmd, "-h")
		if flat := strings.Join(strings.Fields(stdout), " "); twice.MatchString(flat) {
			t.Errorf("%s -h says a default twice: %s", cmd, twice.FindString(flat))
		}
	}
	_, stdout, _ := cliRun(t, "upgrade", "-h")
	for _, want := range []string{"With --inventory, also:", "--inventory FILE", "--drain-timeout DURATION", "--kubeconfig FILE", "--kube-context NAME"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("upgrade -h lacks %q:\n%s", want, stdout)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\s+--to VERSION\s`).FindAllString(stdout, -1)); n != 1 {
		t.Errorf("upgrade -h lists a flag of both forms twice:\n%s", stdout)
	}
}

// The CLI built without the app (talosflash-cli) does not offer it.
func TestUsageWithoutTheApp(t *testing.T) {
	HasApp = false
	t.Cleanup(func() { HasApp = true })
	_, stdout, _ := cliRun(t, "--help")
	if strings.Contains(stdout, "start the desktop app") || !strings.Contains(stdout, "gui         not in this build") {
		t.Errorf("usage of a build without the app:\n%s", stdout)
	}
}
