//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// asNobody is a workspace where this test binary runs as the user nobody
// (uid 65534), as a desktop user runs the CLI: a directory nobody can
// enter, the binary copied into it and a cache directory nobody owns.
type asNobody struct {
	Dir, Bin, CacheDir string
}

func newAsNobody(t *testing.T) asNobody {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody runs the binary in it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := asNobody{Dir: dir, Bin: filepath.Join(dir, "talosflash"), CacheDir: filepath.Join(dir, "cache")}
	copyFile(t, os.Args[0], w.Bin, 0o755)
	if err := os.Mkdir(w.CacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(w.CacheDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return w
}

// Run runs the CLI as nobody with args and the system bus at busAddr, and
// returns its exit code and combined output. No pkexec on its PATH: a
// fallback to it fails instead of prompting.
func (w asNobody) Run(t *testing.T, ctx context.Context, busAddr string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, w.Bin, args...)
	cmd.Env = []string{"TALOSFLASH_TEST_RUN_MAIN=1", "HOME=" + w.CacheDir, "DBUS_SYSTEM_BUS_ADDRESS=" + busAddr, "PATH=" + t.TempDir()}
	cmd.Dir = w.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatalf("run the CLI as nobody: %v", err)
	}
	return 0, out.String()
}
