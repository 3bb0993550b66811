package cli

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
)

// secretFile is a regular file (as /etc/shadow is) whose content must
// never reach any output.
func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(p, []byte("root:SECRET-HASH:20228:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every flag flash registers that elevate.Args.List does not emit is
// refused by the root child's gate itself, whatever it names: a regular
// file with a secret in it (not a FIFO, which the file readers refuse
// unopened). The gate ran after the flag checks every command shares:
// `--elevated --profiles /etc/shadow` read the file as root and quoted its
// first line ("unknown field root:..."), --version and --installer were
// judged first. A flag added to flash later is in this table by itself.
func TestElevatedChildGateRefusesEveryOtherFlashFlag(t *testing.T) {
	withoutFileTargets(t)
	secret := secretFile(t)
	var f flashFlags
	fs := flashFlagSet(Env{Stdout: io.Discard, Stderr: io.Discard}, &f)
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		if _, ok := elevate.ChildFlags[fl.Name]; ok {
			return
		}
		n++
		t.Run(fl.Name, func(t *testing.T) {
			args := []string{"--flash", "--elevated", "--device", "/dev/null", "--yes", "--json"}
			if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				args = append(args, "--"+fl.Name)
			} else {
				args = append(args, "--"+fl.Name, secret)
			}
			code, out := mainWithin(t, args)
			if code != contract.ExitUsage {
				t.Fatalf("exit %d, want %d: %s", code, contract.ExitUsage, out)
			}
			if strings.Contains(out, "SECRET") {
				t.Fatalf("the output quotes the file: %s", out)
			}
			if !strings.Contains(out, "--"+fl.Name+" is not a flag of the elevated write") {
				t.Fatalf("not the gate's refusal: %s", out)
			}
		})
	})
	if n < 10 {
		t.Fatalf("only %d flags outside the child's", n)
	}
}

// Under pkexec (root, PKEXEC_UID set) every command but the elevated write
// of a flash is refused before it reads or writes anything: the polkit
// action asks for the password to write a card, and any program can run
// pkexec on talosflash with arguments of its own. `pkexec talosflash
// schematic --profiles /etc/shadow --role x` quoted the file;
// `inventory init FILE` wrote one as root.
func TestUnderPkexecOnlyTheElevatedWriteRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root process is held to it")
	}
	t.Setenv("PKEXEC_UID", "65534")
	secret := secretFile(t)
	dir := t.TempDir()
	created := filepath.Join(dir, "created.yaml")
	cases := [][]string{
		{"schematic", "--profiles", secret, "--role", "worker"},
		{"profiles", "--profiles", secret},
		{"inventory", "check", secret},
		{"inventory", "init", created},
		{"card", secret},
		{"apply", "--node", "127.0.0.1:1", "--file", secret, "--dry-run"},
		{"outdated", dir, "--write"},
		{"--role", "worker", "--device", created, "--flash"},
		{"flash", "--elevated", "--device", "/dev/null", "--yes", "--json"},
		{"gui"},
		{},
	}
	for name := range commandHelp {
		cases = append(cases, []string{name, secret})
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out := mainWithin(t, args)
			if code != contract.ExitUsage {
				t.Fatalf("exit %d, want %d: %s", code, contract.ExitUsage, out)
			}
			if strings.Contains(out, "SECRET") || !strings.Contains(out, "under pkexec") {
				t.Fatalf("not refused by the pkexec gate: %s", out)
			}
			if _, err := os.Lstat(created); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s was created", created)
			}
		})
	}
}

// The child's target is a symlink to a block device when its gate looks
// and to a file when the flash opens it (the user who owns the link swaps
// it): nothing is written to the file. The gate's stat was the only block
// rule; with the built CLI, a loop flipping the link made the root child
// write a .img file on the second try.
func TestElevatedChildWritesNoFileSwappedInAfterItsGate(t *testing.T) {
	withoutFileTargets(t)
	dev := loopCard(t, 16<<20)
	fx := fakeFixture(t)
	img := filepath.Join(t.TempDir(), "img.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim.img")
	if err := os.WriteFile(victim, []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "card")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	afterElevatedGate = func() {
		if err := os.Remove(link); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(victim, link); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterElevatedGate = func() {} })
	code, out, errOut := childRun(t, elevate.Args{Devices: []string{link}, AllowLoop: true, ForceNonRemovable: true}, img)
	if code == contract.ExitOK || !strings.Contains(out+errOut, "not a block device") {
		t.Fatalf("exit %d, want a refusal: %s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(victim); string(got) != "victim" {
		t.Fatalf("the root child wrote the file swapped in: %d bytes", len(got))
	}
}
