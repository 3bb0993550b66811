//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// The elevated child (a real process) ends within 2 s, its card closed
// with the process, when its stdin ends mid-image (the parent stopped),
// when the stream announces more bytes than it sends and then ends, and
// when it is sent SIGTERM while waiting for bytes. (Its --follow
// predecessor spun at 100% CPU for ever on a feed that lied.)
func TestChildEndsOnStdinAndSignals(t *testing.T) {
	fx := imagetest.New(t, 4<<20, 13, 1<<20)
	send := func(size int64) []byte { // the image, announced as size bytes
		var whole bytes.Buffer
		if _, errs := elevate.SendImages(&whole, []io.Reader{bytes.NewReader(fx.Raw)}, []int64{size}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		return whole.Bytes()
	}
	wire := send(fx.Size)
	lying := send(fx.Size + 1<<20) // announces a MiB more
	for name, tc := range map[string]struct {
		send     []byte
		closeIn  bool // stdin EOF after send
		sigterm  bool
		wantCode int
	}{
		"stdin ends mid-image": {send: wire[:len(wire)/2], closeIn: true, wantCode: 130},
		"less than announced":  {send: lying},
		"SIGTERM":              {send: wire[:3<<20], sigterm: true, wantCode: 143},
	} {
		t.Run(name, func(t *testing.T) {
			card := filepath.Join(t.TempDir(), "card.img")
			cmd := exec.Command(os.Args[0], elevate.Args{Devices: []string{card}}.List()...)
			cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var out lockedBuffer
			copied := make(chan struct{})
			go func() { io.Copy(&out, stdout); close(copied) }()
			done := make(chan error, 1)
			go func() { <-copied; done <- cmd.Wait() }()
			if _, err := stdin.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.closeIn {
				stdin.Close()
			}
			if tc.sigterm {
				// Waiting for bytes once it reported writing.
				for deadline := time.Now().Add(10 * time.Second); !bytes.Contains(out.Bytes(), []byte(`"stage":"write"`)); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no write progress")
					}
				}
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			start := time.Now()
			select {
			case err := <-done:
				code := cmd.ProcessState.ExitCode()
				if err == nil || code == 0 || (tc.wantCode != 0 && code != tc.wantCode) {
					t.Fatalf("exit %d (%v), want a failure %d", code, err, tc.wantCode)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Fatalf("ended %s after", d)
				}
			case <-time.After(2 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatal("the child still runs 2 s on")
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
