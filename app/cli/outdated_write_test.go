package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
)

// outdatedRepo is a fake factory offering v1.14.5 and v1.14.6 and the
// controlplane schematic (newt), and a reference line to it at v1.14.5.
func outdatedRepo(t *testing.T) (fac *factorytest.Server, ref string) {
	t.Helper()
	fac = factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6")
	cp, err := factory.FindProfile(factory.BuiltinProfiles(), "controlplane")
	if err != nil {
		t.Fatal(err)
	}
	id, err := fac.AddSchematic(cp.Schematic())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(fac.URL)
	return fac, u.Host + "/metal-installer/" + id + ":v1.14.5"
}

func writeRef(t *testing.T, path, ref string, pad int) []byte {
	t.Helper()
	data := []byte("# " + strings.Repeat("x", pad) + "\nmachine:\n  install:\n    image: " + ref + "\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func assertUnchanged(t *testing.T, files map[string][]byte) {
	t.Helper()
	for f, want := range files {
		if got, err := os.ReadFile(f); err != nil || string(got) != string(want) {
			t.Errorf("%s changed (err %v)", f, err)
		}
	}
}

func outdatedJSONRun(t *testing.T, args ...string) (int, []outdatedJSON, string) {
	t.Helper()
	code, stdout, stderr := cliRun(t, append([]string{"outdated", "--json"}, args...)...)
	var res []outdatedJSON
	if err := json.Unmarshal(answer(t, stdout, "outdated"), &res); err != nil {
		t.Fatalf("exit %d, --json printed no JSON (%v):\n%s\n%s", code, err, stdout, stderr)
	}
	return code, res, stderr
}

// When the factory cannot return the schematic, no reference to it is
// written: every one is BLOCKED with the reason (the second reference to the
// same schematic used to get no note at all and be written), and --write
// says so and fails, exit 7 (it ended "nothing to update", exit 0).
func TestOutdatedWriteBlocksUncomparedExtensions(t *testing.T) {
	fac, ref := outdatedRepo(t)
	fac.DisableSchematicLookup()
	dir := t.TempDir()
	files := map[string][]byte{}
	for _, n := range []string{"a.yaml", "b.yaml"} {
		files[filepath.Join(dir, n)] = writeRef(t, filepath.Join(dir, n), ref, 0)
	}
	code, stdout, stderr := cliRun(t, "outdated", dir, "--write", "--factory", fac.URL)
	if code != contract.ExitConfig || strings.Count(stdout, "BLOCKED: extensions not compared") != 2 || strings.Contains(stdout+stderr, "nothing to update") ||
		!strings.Contains(stdout, "nothing written: 2 reference(s) blocked") || !strings.Contains(stderr, "a.yaml:4") || !strings.Contains(stderr, "b.yaml:4") {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	assertUnchanged(t, files)
	code, res, _ := outdatedJSONRun(t, dir, "--write", "--factory", fac.URL)
	for _, r := range res {
		if r.Written || !strings.Contains(r.Blocked, "the factory did not return it") || r.Outcome != "blocked" {
			t.Errorf("%+v", r)
		}
	}
	if code != contract.ExitConfig {
		t.Errorf("--json: exit %d, want %d", code, contract.ExitConfig)
	}
	assertUnchanged(t, files)

	// Without --write it is a report: the blocked references said, exit 0.
	if code, stdout, _ := cliRun(t, "outdated", dir, "--factory", fac.URL); code != contract.ExitOK || !strings.Contains(stdout, "BLOCKED") {
		t.Fatalf("report: exit %d:\n%s", code, stdout)
	}
}

// A read-only file and a file with hard links are refused (run as root too),
// and then nothing is written at all: every file stays as it was.
func TestOutdatedWriteRefusesReadOnlyAndHardLinks(t *testing.T) {
	fac, ref := outdatedRepo(t)
	for _, c := range []struct {
		name, want string
		prep       func(t *testing.T, f string)
	}{
		{"read-only", "read-only", func(t *testing.T, f string) { os.Chmod(f, 0o444) }},
		{"hard link", "2 hard links", func(t *testing.T, f string) {
			if err := os.Link(f, filepath.Join(t.TempDir(), "other-name.yaml")); err != nil {
				t.Skip("no hard links here:", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ok, bad := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
			files := map[string][]byte{ok: writeRef(t, ok, ref, 0), bad: writeRef(t, bad, ref, 0)}
			c.prep(t, bad)
			code, res, stderr := outdatedJSONRun(t, dir, "--write", "--factory", fac.URL)
			if code != contract.ExitStorage || !strings.Contains(stderr, bad) || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "nothing was changed") {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			assertUnchanged(t, files)
			for _, r := range res {
				want := "not-written"
				if r.File == bad {
					want = "refused"
				}
				if r.Written || r.Outcome != want || r.OutcomeReason == "" {
					t.Errorf("%s: %+v", r.File, r)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 2 {
				t.Errorf("files left behind: %v", entries)
			}
		})
	}
}

// Run as root, a rewritten file keeps its owner, group and mode (setgid).
func TestOutdatedWriteKeepsOwnerGroupMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown to another user)")
	}
	fac, ref := outdatedRepo(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "a.yaml")
	old := writeRef(t, f, ref, 0)
	if err := os.Chown(f, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o664|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	code, res, stderr := outdatedJSONRun(t, dir, "--write", "--factory", fac.URL)
	if code != contract.ExitOK || len(res) != 1 || !res[0].Written || res[0].Outcome != "written" {
		t.Fatalf("exit %d %+v\n%s", code, res, stderr)
	}
	got, _ := os.ReadFile(f)
	if want := strings.Replace(string(old), ":v1.14.5", ":v1.14.6", 1); string(got) != want {
		t.Fatalf("content %q", got)
	}
	st, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := ownerOf(st)
	if uid != 4242 || gid != 4343 || st.Mode() != 0o664|os.ModeSetgid {
		t.Errorf("owner %d:%d mode %v, want 4242:4343 %v", uid, gid, st.Mode(), 0o664|os.ModeSetgid)
	}
}

// The file system fills up half-way through (a small tmpfs): nothing is
// changed, --json still reports each file, the exit code is the storage one
// (not "network"), and the message says every file is as it was.
func TestOutdatedWriteFullDiskMidRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount a tmpfs)")
	}
	fac, ref := outdatedRepo(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	// 8 KiB + 40 KiB: the first new file fits, the second does not (the old
	// code replaced the first, freeing its space, before failing on the second).
	small, big := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	files := map[string][]byte{small: writeRef(t, small, ref, 8<<10-200), big: writeRef(t, big, ref, 40<<10-200)}
	code, res, stderr := outdatedJSONRun(t, dir, "--write", "--factory", fac.URL)
	if code != contract.ExitStorage || !strings.Contains(stderr, "no space left") || !strings.Contains(stderr, "nothing was changed") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	assertUnchanged(t, files)
	if len(res) != 2 {
		t.Fatalf("JSON: %+v", res)
	}
	for _, r := range res {
		if r.Written || r.Outcome != "failed" && r.Outcome != "not-written" {
			t.Errorf("%s: %+v", r.File, r)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// An errno is classified by its meaning: local storage and permission
// errors are not "network" (syscall.Errno implements net.Error).
func TestClassifyErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, contract.ExitStorage},
		{fmt.Errorf("rewrite: %w", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}), contract.ExitStorage},
		{&os.LinkError{Op: "rename", Old: "/a", New: "/b", Err: syscall.EROFS}, contract.ExitStorage},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EPERM}, contract.ExitStorage},
		{syscall.EDQUOT, contract.ExitStorage},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, contract.ExitNetwork},
		{&url.Error{Op: "Get", URL: "http://127.0.0.1:1", Err: errors.New("boom")}, contract.ExitNetwork},
		{syscall.EINVAL, contract.ExitFailure},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
