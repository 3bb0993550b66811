// Package xvfbtest starts a private X server for tests that open a real
// window (the app under Xvfb).
package xvfbtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Start starts Xvfb on a free display of a high random number, with the
// given screen size ("1000x700x24"), and returns the display name. The
// server is stopped with SIGTERM when the test ends, so it removes its
// lock and socket. Tests in different packages run in parallel, and a real
// window once failed to open while another test's X server was starting or
// stopping: a lock file makes such tests take turns. Other X servers on
// the machine (a desktop, a script's plain Xvfb) take the low numbers that
// -displayfd alone would pick, and one stopping on the number ours just took
// unlinks our socket: hence the high random ones. Skips without Xvfb.
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
	for attempt := 0; attempt < 10; attempt++ {
		n := 200 + rand.IntN(700)
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X%d-lock", n)); err == nil {
			continue // in use
		}
		cmd, ok := startOn(t, xvfb, n, screen)
		if !ok {
			continue // taken in between
		}
		t.Cleanup(func() {
			Terminate(cmd, 10*time.Second)
			lock.Close() // the next test's X server may start
		})
		return fmt.Sprintf(":%d", n)
	}
	lock.Close()
	t.Fatal("Xvfb did not start on any of 10 free displays")
	return ""
}

// startOn starts Xvfb on display n and waits until it accepts connections
// (it writes the number on -displayfd then); false, with the server gone,
// when it did not come up there.
func startOn(t testing.TB, xvfb string, n int, screen string) (*exec.Cmd, bool) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(xvfb, fmt.Sprintf(":%d", n), "-displayfd", "3", "-screen", "0", screen, "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		t.Fatal(err)
	}
	_ = w.Close()
	line, err := bufio.NewReader(io.LimitReader(r, 64)).ReadString('\n')
	_ = r.Close()
	if err != nil || strings.TrimSpace(line) != fmt.Sprint(n) {
		Terminate(cmd, 10*time.Second)
		return nil, false
	}
	return cmd, true
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

// WindowShown reports whether a window titled title is mapped on display
// (xwininfo, bounded by 10 s).
func WindowShown(display, title string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "xwininfo", "-display", display, "-root", "-tree").Output()
	return err == nil && bytes.Contains(out, []byte(title))
}

// Buffer is a bytes.Buffer that a started app's output copier and the test
// can share.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartApp starts cmd (an app on display) with its output in the returned
// buffer and waits, up to 2 minutes, until a window titled title is mapped;
// the test fails with the app's output if it exits first or shows none.
// exited gets the app's end: stopping it is the caller's.
//
// An app whose X library could not open the display while the server
// answers (xwininfo -root on the same display) is started once more, and
// the test log says so: CI saw this once, for the arm64 app under
// qemu-user, and never here in 50 runs, loaded or not; the failure message
// then carries the X server's listening sockets (/proc/net/unix), which is
// what decides where a client's connection goes.
func StartApp(t testing.TB, cmd *exec.Cmd, display, title string) (out *Buffer, exited <-chan error) {
	t.Helper()
	unstarted := *cmd // its context and settings, to start it again
	out, exited, err := startApp(cmd, display, title)
	if err != nil && strings.Contains(out.String(), "Failed to open display") && serverAnswers(display) {
		t.Logf("the app could not open %s although the X server answers; starting it once more. Its output:\n%s\nX sockets:\n%s", display, out.String(), xSockets(display))
		*cmd = unstarted // the caller stops the command it passed: the new start
		out, exited, err = startApp(cmd, display, title)
	}
	if err != nil {
		t.Fatalf("%v:\n%s\nX server answers: %v; X sockets:\n%s", err, out.String(), serverAnswers(display), xSockets(display))
	}
	return out, exited
}

// startApp starts cmd and waits up to 2 minutes for its window; on an
// error the app has ended.
func startApp(cmd *exec.Cmd, display, title string) (*Buffer, <-chan error, error) {
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return out, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for !WindowShown(display, title) {
		select {
		case err := <-done:
			return out, nil, fmt.Errorf("the app exited (%v) before showing its window", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return out, nil, errors.New("no window after 2 minutes")
		}
	}
	return out, done, nil
}

// serverAnswers reports whether the X server on display serves a client
// (its root window, bounded by 10 s).
func serverAnswers(display string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "xwininfo", "-display", display, "-root").Run() == nil
}

// xSockets lists the Unix sockets of display (its file socket and, on
// Linux, its abstract one, which a client tries first) as /proc/net/unix
// shows them: where a connection to display goes.
func xSockets(display string) string {
	data, err := os.ReadFile("/proc/net/unix") // a kernel table: finite
	if err != nil {
		return err.Error()
	}
	name := "/tmp/.X11-unix/X" + strings.TrimPrefix(display, ":")
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[len(f)-1] == name || f[len(f)-1] == "@"+name) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "(none for " + name + ")"
	}
	return strings.Join(lines, "\n")
}
