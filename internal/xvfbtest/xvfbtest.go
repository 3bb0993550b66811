// Package xvfbtest starts a private X server for tests that open a real
// window (the app under Xvfb).
package xvfbtest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Start starts Xvfb on a display it picks itself (-displayfd), with the
// given screen size ("1000x700x24"), and returns the display name. The
// server is stopped with SIGTERM when the test ends, so it removes its
// lock and socket. Tests in different packages run in parallel, and a real
// window once failed to open while another test's X server was starting or
// stopping: a lock file makes such tests take turns. Skips without Xvfb.
func Start(t testing.TB, screen string) string {
	t.Helper()
	xvfb, err := exec.LookPath("Xvfb")
	if err != nil {
		t.Skip("Xvfb not installed (scripts/setup.sh installs it)")
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "talosflash-xvfb.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockFile(lock); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		lock.Close()
		t.Fatal(err)
	}
	cmd := exec.Command(xvfb, "-displayfd", "3", "-screen", "0", screen, "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	_ = w.Close()
	t.Cleanup(func() {
		Terminate(cmd, 10*time.Second)
		lock.Close() // the next test's X server may start
	})
	// Xvfb writes the display number once it accepts connections.
	line, err := bufio.NewReader(io.LimitReader(r, 64)).ReadString('\n')
	_ = r.Close()
	if err != nil {
		t.Fatalf("Xvfb did not report its display: %v", err)
	}
	return ":" + strings.TrimSpace(line)
}

// Terminate stops a started command the way a desktop session does: SIGTERM
// (so it cleans up), then a kill if it is still running after grace. It
// returns once the command has been waited for.
func Terminate(cmd *exec.Cmd, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}
