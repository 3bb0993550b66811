package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging"
)

// The elevated child's failure ends the parent with the child's code and
// words; rights not granted and a child that can't start are "device".
func TestElevatedChildExitCodes(t *testing.T) {
	err := fmt.Errorf("flash: %w", &elevate.Error{Code: contract.ExitVerify, Message: "verify mismatch at offset 4096", Reported: true})
	if exitCode(err) != contract.ExitVerify || !strings.HasSuffix(err.Error(), ": verify mismatch at offset 4096") {
		t.Fatalf("verify child: code %d err %v", exitCode(err), err)
	}
	if c := exitCode(&elevate.Error{Code: 126, Message: "not authorized", NotGranted: true}); c != contract.ExitDevice {
		t.Fatalf("denied child: code %d", c)
	}
	if c := exitCode(&elevate.Error{Code: 3, Message: "boom"}); c != contract.ExitWrite {
		t.Fatalf("child exit 3 without a report: code %d", c)
	}
	if c := exitCode(fmt.Errorf("%w: no pkexec", elevate.ErrStart)); c != contract.ExitDevice {
		t.Fatalf("child not started: code %d", c)
	}
}

// The elevated child's exit codes mean to the GUI what they mean here.
func TestElevateErrorMatchesExitCodes(t *testing.T) {
	for code, target := range map[int]error{contract.ExitVerify: imaging.ErrVerifyMismatch, contract.ExitWrite: imaging.ErrIncomplete, contract.ExitImage: imaging.ErrCorruptImage, contract.ExitInterrupted: context.Canceled} {
		err := &elevate.Error{Code: code, Message: "x", Reported: true}
		if !errors.Is(err, target) {
			t.Errorf("child exit %d does not match %v", code, target)
		}
		if got := exitCode(err); got != code {
			t.Errorf("child exit %d maps to %d", code, got)
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
	go sendImage(t, pw, img)                              // fails once pw is closed
	out := &killOnEvent{stage: "write", atLeast: 1 << 62} // never signals; we only watch the output
	var errOut bytes.Buffer
	time.AfterFunc(300*time.Millisecond, func() { pw.Close() })
	start := time.Now()
	code := Main(elevate.Args{Devices: []string{filepath.Join(dir, "card.img")}}.List(), Env{Stdin: pr, Stdout: out, Stderr: &errOut})
	assertInterruptedWrite(t, code, start, errOut.String())
}
