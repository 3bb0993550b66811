// Package elevate runs the privileged write step, `talosflash --flash --json`
// re-run through devices.ElevatedCommand, and reads its JSON lines. The CLI
// and the GUI both write a card needing root through it.
package elevate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

// The CLI's exit codes (app/cli/exitcode.go) the child may report; app/cli
// tests that these agree.
const (
	codeVerify      = 4
	codeWrite       = 6
	codeImage       = 9
	codeInterrupted = 130
)

// killAfter is how long an interrupted child may take to stop.
var killAfter = 10 * time.Second

// Event is one JSON line of `talosflash --flash --json`.
type Event struct {
	Event      string  `json:"event"` // progress, result, error, info, warning
	Stage      string  `json:"stage"`
	Done       int64   `json:"done"`
	Total      int64   `json:"total"`
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"eta_seconds"`
	Code       int     `json:"code"`
	Message    string  `json:"message"`
	Bytes      int64   `json:"bytes"`
	SHA256     string  `json:"sha256"`
	Verified   bool    `json:"verified"`
	VerifyMode string  `json:"verify_mode"`

	Line []byte `json:"-"` // the line as the child wrote it
}

// Progress is a progress event as the pipeline reported it in the child.
func (e *Event) Progress() imaging.Progress {
	return imaging.Progress{
		Stage: imaging.Stage(e.Stage), Done: e.Done, Total: e.Total,
		Rate: e.Rate, ETA: time.Duration(e.ETASeconds * float64(time.Second)),
	}
}

// Error is a failure the elevated child reported, or its exit without one.
type Error struct {
	Code       int // the CLI's exit code, -1 when unknown
	Message    string
	Reported   bool // from the child's "error" line
	NotGranted bool // pkexec exit 126/127: administrator rights were not granted
}

func (e *Error) Error() string {
	return fmt.Sprintf("elevated write failed (exit code %d): %s", e.Code, e.Message)
}

// Is maps the CLI's exit codes back to the library's sentinel errors, so a
// failure in the child reads like the same failure in process.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case codeVerify:
		return target == imaging.ErrVerifyMismatch
	case codeWrite:
		return target == imaging.ErrIncomplete
	case codeImage:
		return target == imaging.ErrCorruptImage
	case codeInterrupted:
		return target == context.Canceled
	}
	return false
}

// Run starts cmd, calls on (when not nil) for every JSON line of its stdout
// (other lines are skipped) and waits for it. Cancelling ctx closes the
// child's stdin and interrupts it (SIGINT, then a kill after a grace
// period; both fail for a root child, the stdin close does not) and returns
// ctx's error.
// A failure is an *Error: the child's "error" line, else its exit status
// with the start of its stderr; an exit 0 without a "result" line too.
// cmd.Stderr is captured unless the caller set it.
func Run(ctx context.Context, cmd *exec.Cmd, on func(Event)) error {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start elevated write: %w", err)
	}
	var stderr bytes.Buffer
	if cmd.Stderr == nil {
		cmd.Stderr = &limitedBuffer{buf: &stderr, max: 8 << 10}
	}
	// The child (talosflash --elevated) cancels itself when its stdin
	// closes. That works across the privilege boundary, where a signal
	// from the user to the root child is refused.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("start elevated write: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start elevated write: %w", err)
	}

	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			_ = stdin.Close()
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-stopWatch:
			case <-time.After(killAfter):
				_ = cmd.Process.Kill()
			}
		case <-stopWatch:
		}
	}()

	var childErr *Error
	sawResult := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // not ours (e.g. a stray log line)
		}
		switch ev.Event {
		case "error":
			childErr = &Error{Code: ev.Code, Message: ev.Message, Reported: true}
		case "result":
			sawResult = true
		}
		if on != nil {
			ev.Line = bytes.Clone(sc.Bytes())
			on(ev)
		}
	}
	_, _ = io.Copy(io.Discard, stdout) // after an over-long line: never leave the child blocked on a full pipe
	waitErr := cmd.Wait()
	_ = stdin.Close()
	close(stopWatch)
	<-watched

	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("elevated write: %w", ctx.Err())
	case childErr != nil:
		return childErr
	case waitErr != nil:
		code := -1
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) {
			code = exit.ExitCode()
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = waitErr.Error()
		}
		e := &Error{Code: code, Message: msg, NotGranted: code == 126 || code == 127}
		if e.NotGranted {
			e.Message = "administrator rights were not granted (" + msg + ")"
		}
		return e
	case !sawResult:
		return &Error{Code: -1, Message: "the elevated write ended without reporting a result"}
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
