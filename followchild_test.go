//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// The --follow child (a real process) ends within 2 s, its card closed
// with the process, when its feed says more than the file holds and then
// "done" or EOF, or when it is sent SIGTERM while waiting for bytes. It
// used to spin at 100% CPU for ever: the follower turned the file's EOF
// into (0, nil) and never looked at its context.
func TestFollowChildEnds(t *testing.T) {
	fx := imagetest.New(t, 4<<20, 13, 1<<20)
	dir := t.TempDir()
	partial := filepath.Join(dir, "img.raw.xz.partial")
	if err := os.WriteFile(partial, fx.XZ, 0o644); err != nil {
		t.Fatal(err)
	}
	beyond := fmt.Sprintf("size %d\n", len(fx.XZ)+1<<20)
	for name, tc := range map[string]struct {
		feed     string
		closeIn  bool // stdin EOF after the feed
		sigterm  bool
		wantCode int
	}{
		"short file, done": {feed: beyond + "done\n"},
		"short file, EOF":  {feed: beyond, closeIn: true},
		"SIGTERM":          {feed: "size 4096\n", sigterm: true, wantCode: 143},
	} {
		t.Run(name, func(t *testing.T) {
			card := filepath.Join(t.TempDir(), "card.img")
			cmd := exec.Command(os.Args[0], elevate.Args{Image: partial, Devices: []string{card}, Follow: true}.List()...)
			cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if _, err := io.WriteString(stdin, tc.feed); err != nil {
				t.Fatal(err)
			}
			if tc.closeIn {
				stdin.Close()
			}
			if tc.sigterm {
				time.Sleep(300 * time.Millisecond) // waiting for bytes by now
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			select {
			case err := <-done:
				code := cmd.ProcessState.ExitCode()
				if err == nil || code == 0 || (tc.wantCode != 0 && code != tc.wantCode) {
					t.Fatalf("exit %d (%v), want a failure %d", code, err, tc.wantCode)
				}
			case <-time.After(2 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatal("the child still runs 2 s on")
			}
		})
	}
}
