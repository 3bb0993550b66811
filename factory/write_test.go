package factory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A replace that fails after other files were replaced puts them back: every
// file ends as it was, and the results say which were restored.
func TestWriteUpdatesRestoresOnLateFailure(t *testing.T) {
	dir := t.TempDir()
	const id = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	raw := "factory.talos.dev/metal-installer/" + id + ":v1.14.5"
	ref, err := ParseInstallerRef(raw)
	if err != nil {
		t.Fatal(err)
	}
	var ups []Update
	old := map[string]string{}
	for _, n := range []string{"a.yaml", "b.yaml", "c.yaml"} {
		f := filepath.Join(dir, n)
		old[f] = "# " + n + "\nimage: " + raw + "\n"
		if err := os.WriteFile(f, []byte(old[f]), 0o640); err != nil {
			t.Fatal(err)
		}
		ups = append(ups, Update{Use: InstallerUse{File: f, Line: 2, Raw: raw, Ref: ref}, Current: "v1.14.5", Target: "v1.14.6",
			NewRaw: strings.Replace(raw, "v1.14.5", "v1.14.6", 1)})
	}
	calls := 0
	renameFile = func(from, to string) error {
		if calls++; calls == 3 {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EIO}
		}
		return os.Rename(from, to)
	}
	t.Cleanup(func() { renameFile = os.Rename })

	results, err := WriteUpdates(ups)
	var werr *WriteError
	if !errors.As(err, &werr) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err = %v", err)
	}
	for f, want := range old {
		if got, _ := os.ReadFile(f); string(got) != want {
			t.Errorf("%s not restored: %q", f, got)
		}
		if st, _ := os.Stat(f); st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v", f, st.Mode())
		}
	}
	want := []string{OutcomeRestored, OutcomeRestored, OutcomeFailed}
	for i, r := range results {
		if r.Outcome != want[i] || r.Reason == "" {
			t.Errorf("%s: %+v, want %s", r.File, r, want[i])
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("left behind: %v", entries)
	}
}

// A blocked update is not written; the file whose only update it is says
// "blocked" with the reason, the others are written, and Blocked names it:
// the write did not do all it was asked.
func TestWriteUpdatesLeavesBlockedOut(t *testing.T) {
	dir := t.TempDir()
	const id = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	raw := "factory.talos.dev/metal-installer/" + id + ":v1.14.5"
	ref, err := ParseInstallerRef(raw)
	if err != nil {
		t.Fatal(err)
	}
	var ups []Update
	for _, n := range []string{"ok.yaml", "blocked.yaml"} {
		f := filepath.Join(dir, n)
		if err := os.WriteFile(f, []byte("image: "+raw+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		u := Update{Use: InstallerUse{File: f, Line: 1, Raw: raw, Ref: ref}, Current: "v1.14.5", Target: "v1.14.6", NewRaw: strings.Replace(raw, "v1.14.5", "v1.14.6", 1)}
		if n == "blocked.yaml" {
			u.Blocked = "siderolabs/newt not offered for v1.14.6"
		}
		ups = append(ups, u)
	}
	results, err := WriteUpdates(ups)
	if err != nil || len(results) != 2 || results[0].Outcome != OutcomeWritten || results[1].Outcome != OutcomeBlocked || results[1].Reason != ups[1].Blocked {
		t.Fatalf("%+v %v", results, err)
	}
	if got, _ := os.ReadFile(ups[1].Use.File); string(got) != "image: "+raw+"\n" {
		t.Fatalf("the blocked file was written: %q", got)
	}
	berr := Blocked(ups)
	var b *BlockedError
	if !errors.Is(berr, ErrBlocked) || !errors.As(berr, &b) || len(b.Updates) != 1 || !strings.Contains(berr.Error(), "blocked.yaml:1 (siderolabs/newt not offered") {
		t.Fatalf("Blocked: %v", berr)
	}
	if Blocked(ups[:1]) != nil {
		t.Fatal("Blocked without a blocked update")
	}
}
