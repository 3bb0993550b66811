package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging"
)

// TestHelperChild stands in for the elevated `talosflash --flash --json`
// child: it prints what TALOSFLASH_CHILD says and exits.
func TestHelperChild(t *testing.T) {
	switch os.Getenv("TALOSFLASH_CHILD") {
	case "ok":
		fmt.Println(`{"event":"progress","stage":"write","done":5,"total":10,"rate":1,"eta_seconds":5}`)
		fmt.Println(`not json from pkexec`)
		fmt.Println(`{"event":"progress","stage":"verify","done":10,"total":10,"rate":1,"eta_seconds":0}`)
		fmt.Println(`{"event":"result","device":"/dev/sdz","bytes":10,"verified":true}`)
		os.Exit(0)
	case "verify":
		fmt.Println(`{"event":"error","code":4,"message":"verify mismatch at offset 4096"}`)
		os.Exit(4)
	case "denied":
		os.Exit(126) // pkexec: the user dismissed the dialog
	}
}

type recordingReporter struct {
	progress []imaging.Progress
	events   []map[string]any
}

func (r *recordingReporter) Progress(p imaging.Progress) { r.progress = append(r.progress, p) }
func (r *recordingReporter) Info(string, ...any)         {}
func (r *recordingReporter) Event(name string, f map[string]any) {
	f["event"] = name
	r.events = append(r.events, f)
}
func (r *recordingReporter) Finish() {}

func child(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperChild$")
	cmd.Env = append(os.Environ(), "TALOSFLASH_CHILD="+mode)
	return cmd
}

func TestRelayElevated(t *testing.T) {
	rep := &recordingReporter{}
	if err := relayElevated(context.Background(), child("ok"), rep); err != nil {
		t.Fatalf("ok child: %v", err)
	}
	if len(rep.progress) != 2 || rep.progress[1].Stage != imaging.StageVerify || rep.progress[1].Done != 10 {
		t.Fatalf("relayed progress %+v", rep.progress)
	}
	if len(rep.events) != 1 || rep.events[0]["verified"] != true || rep.events[0]["device"] != "/dev/sdz" {
		t.Fatalf("relayed result %v", rep.events)
	}

	err := relayElevated(context.Background(), child("verify"), &recordingReporter{})
	if exitCode(err) != ExitVerify || err.Error() != "verify mismatch at offset 4096" {
		t.Fatalf("verify child: code %d err %v", exitCode(err), err)
	}
	err = relayElevated(context.Background(), child("denied"), &recordingReporter{})
	if exitCode(err) != ExitDevice {
		t.Fatalf("denied child: code %d err %v", exitCode(err), err)
	}
}

// The elevated child's exit codes mean to the GUI what they mean here.
func TestElevateErrorMatchesExitCodes(t *testing.T) {
	for code, target := range map[int]error{ExitVerify: imaging.ErrVerifyMismatch, ExitWrite: imaging.ErrIncomplete, ExitImage: imaging.ErrCorruptImage, ExitInterrupted: context.Canceled} {
		err := &elevate.Error{Code: code, Message: "x", Reported: true}
		if !errors.Is(err, target) {
			t.Errorf("child exit %d does not match %v", code, target)
		}
		if got := classify(err); target != context.Canceled && got != code {
			t.Errorf("child exit %d classifies as %d", code, got)
		}
	}
}

// The elevated child stops when its parent closes its stdin (the parent
// cannot signal a root process): an interrupted, incomplete card.
func TestElevatedChildCancelsOnStdinClose(t *testing.T) {
	dir := t.TempDir()
	img := bigSparseImage(t, dir)
	pr, pw := io.Pipe()
	out := &killOnEvent{stage: "write", atLeast: 1 << 62} // never signals; we only watch the output
	var errOut bytes.Buffer
	time.AfterFunc(300*time.Millisecond, func() { pw.Close() })
	start := time.Now()
	code := Main([]string{"--flash", "--elevated", "--image", img, "--device", filepath.Join(dir, "card.img"), "--yes", "--json"},
		Env{Stdin: pr, Stdout: out, Stderr: &errOut})
	assertInterruptedWrite(t, code, start, errOut.String())
}
