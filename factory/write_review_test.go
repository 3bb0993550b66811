package factory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func reviewUpdate(t *testing.T, file string) Update {
	t.Helper()
	const id = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	raw := "factory.talos.dev/metal-installer/" + id + ":v1.14.5"
	ref, err := ParseInstallerRef(raw)
	if err != nil {
		t.Fatal(err)
	}
	return Update{Use: InstallerUse{File: file, Line: 2, Raw: raw, Ref: ref}, Current: "v1.14.5", Target: "v1.14.6",
		NewRaw: strings.Replace(raw, "v1.14.5", "v1.14.6", 1)}
}

const reviewOld = "# x\nimage: factory.talos.dev/metal-installer/ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9:v1.14.5\n"

// A config reached through a symlink (dotfiles kept by stow, a repo
// linked into place) is updated through the link: the link stays a link and
// its target gets the new version.
func TestWriteUpdatesThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real", "worker.yaml")
	os.MkdirAll(filepath.Dir(target), 0o755)
	if err := os.WriteFile(target, []byte(reviewOld), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "worker.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	results, err := WriteUpdates([]Update{reviewUpdate(t, link)})
	if err != nil {
		t.Fatalf("err = %v (results %+v)", err, results)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v %v", st.Mode(), err)
	}
	got, _ := os.ReadFile(target)
	if !strings.Contains(string(got), ":v1.14.6") {
		t.Errorf("target not updated: %q", got)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode())
	}
}

// One file named twice (two paths to it) is one file: written once, not
// refused as "another program holds its lock".
func TestWriteUpdatesSameFileTwoNames(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "worker.yaml")
	if err := os.WriteFile(f, []byte(reviewOld), 0o640); err != nil {
		t.Fatal(err)
	}
	other := dir + "/./worker.yaml" // filepath.Join would clean it to f
	results, err := WriteUpdates([]Update{reviewUpdate(t, f), reviewUpdate(t, other)})
	if err != nil {
		t.Fatalf("err = %v (results %+v)", err, results)
	}
	got, _ := os.ReadFile(f)
	if strings.Count(string(got), ":v1.14.6") != 1 || strings.Contains(string(got), "v1.14.5") {
		t.Errorf("file = %q", got)
	}
	if len(results) != 2 {
		t.Fatalf("results %+v", results)
	}
	for _, r := range results {
		if r.Outcome != OutcomeWritten || strings.Contains(r.Reason, "another program") {
			t.Errorf("%+v", r)
		}
	}
	if results[1].File != other || !strings.Contains(results[1].Reason, "the same file as "+f) {
		t.Errorf("second name: %+v", results[1])
	}
}

// When putting a replaced file back fails too, its old content stays where
// the error says it is (the backup beside it), not deleted on the way out.
func TestWriteUpdatesKeepsBackupWhenRestoreFails(t *testing.T) {
	dir := t.TempDir()
	var ups []Update
	for _, n := range []string{"a.yaml", "b.yaml"} {
		f := filepath.Join(dir, n)
		if err := os.WriteFile(f, []byte(reviewOld), 0o640); err != nil {
			t.Fatal(err)
		}
		ups = append(ups, reviewUpdate(t, f))
	}
	calls := 0
	renameFile = func(from, to string) error {
		// 1: a replaced; 2: b fails; 3: putting a back fails.
		if calls++; calls >= 2 {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EIO}
		}
		return os.Rename(from, to)
	}
	t.Cleanup(func() { renameFile = os.Rename })

	_, err := WriteUpdates(ups)
	var werr *WriteError
	if !errors.As(err, &werr) || len(werr.Unrestored) != 1 {
		t.Fatalf("err = %v", err)
	}
	// The error names where a.yaml's old content is: it must be there.
	entries, _ := os.ReadDir(dir)
	found := false
	for _, e := range entries {
		if strings.Contains(werr.Unrestored[0], e.Name()) && e.Name() != "a.yaml" {
			if got, _ := os.ReadFile(filepath.Join(dir, e.Name())); string(got) == reviewOld {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("a.yaml's old content is gone: error %q, directory %v", werr.Unrestored[0], entries)
	}
}

// A symlinked installer file (dotfiles kept by stow, a shared repo linked
// in) is scanned like the file it names, not skipped without a word.
func TestFindInstallerRefsFollowsSymlinkedFiles(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	target := filepath.Join(elsewhere, "installer-worker.yaml")
	if err := os.WriteFile(target, []byte(reviewOld), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "talos", "installer-worker.yaml")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	uses, _, err := FindInstallerRefs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) != 1 || uses[0].File != link {
		t.Fatalf("uses = %+v, want the reference in %s", uses, link)
	}
}
