//go:build unix

package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/node/nodetest"
)

// The adversarial snapshot checks that need Unix: a FIFO, /dev/zero and
// the umask.

// A FIFO (an endless source), a link to /dev/zero and a directory are
// refused as a snapshot before any read: the check never blocks on them.
func TestCheckEtcdSnapshotRefusesEndlessSources(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	zero := filepath.Join(dir, "zero.db")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, zero, dir} {
		for _, skip := range []bool{false, true} {
			done := make(chan error, 1)
			go func() { _, err := CheckEtcdSnapshot(p, skip); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrSnapshotInvalid) || !strings.Contains(err.Error(), "not a regular file") {
					t.Errorf("%s (skip %v): %v", p, skip, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s (skip %v): the check blocks", p, skip)
			}
		}
	}
}

// Where the snapshot may not land: a dangling link at FILE (its target
// never created), FILE.part a link to another file (that file never
// written), a folder that cannot be written; each leaves no FILE.part,
// and a umask of 0 still gives 0600.
func TestSaveEtcdSnapshotFileTraps(t *testing.T) {
	cp, _, _, tc := etcdCluster(t, nodetest.NodeOptions{})
	dir := t.TempDir()

	target := filepath.Join(dir, "target.db")
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, link, SnapshotOptions{}); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("a dangling link: %v", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("written through a link")
	}

	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "etcd.db")
	if err := os.Symlink(victim, path+".part"); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0)
	snap, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, path, SnapshotOptions{})
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatal("FILE.part's link was written through")
	}
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || snap.Size != st.Size() {
		t.Fatalf("FILE: %v %v", st.Mode(), err)
	}

	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		_, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, filepath.Join(ro, "etcd.db"), SnapshotOptions{})
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("a folder not writable: %v", err)
		}
		noFiles(t, filepath.Join(ro, "etcd.db"))
	}
	noFiles(t, filepath.Join(dir, "missing", "etcd.db"))
	if _, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, filepath.Join(dir, "missing", "etcd.db"), SnapshotOptions{}); err == nil {
		t.Fatal("a folder that does not exist")
	}
}
