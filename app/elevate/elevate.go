// Package elevate owns the privileged write step's protocol: the arguments
// of the child (`talosflash --flash --elevated --json ...`, run through
// devices.ElevatedCommand), the image stream its parent writes on its
// stdin (one format for one image or several: SendImages, ReceiveImages;
// image.go), the typed JSON lines it writes and its parent reads (exit
// codes and events: app/contract). app/plan runs it for the CLI and the
// GUI.
package elevate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging"
)

// killAfter is how long an interrupted child may take to stop.
var killAfter = 10 * time.Second

// pipeWait is how long Run waits for the child's output to close after the
// child exited: a grandchild left behind (pkexec's helpers, a shell's
// background job) may hold it open for ever.
var pipeWait = time.Second

// ErrStart marks a child that could not be started (no pkexec, bad path).
var ErrStart = errors.New("cannot start the elevated write")

// Error is a failure the elevated child reported, or its exit without one.
type Error struct {
	Code       int // the child's exit code (Exit*), -1 when unknown
	Message    string
	Reported   bool // from the child's "error" line
	NotGranted bool // pkexec exit 126/127: administrator rights were not granted
}

func (e *Error) Error() string {
	if e.Reported {
		return e.Message // the child's own words, as the same failure in process reads
	}
	return fmt.Sprintf("elevated write failed (exit code %d): %s", e.Code, e.Message)
}

// ExitCode is the exit code the parent should end with: the child's when
// it reported one, "device" when rights were refused, else a write failure.
func (e *Error) ExitCode() int {
	switch {
	case e.Reported:
		return e.Code
	case e.NotGranted:
		return contract.ExitDevice
	}
	return contract.ExitWrite
}

// Is maps the exit codes back to the library's sentinel errors, so a
// failure in the child reads like the same failure in process.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case contract.ExitVerify:
		return target == imaging.ErrVerifyMismatch
	case contract.ExitWrite:
		return target == imaging.ErrIncomplete
	case contract.ExitImage:
		return target == imaging.ErrCorruptImage
	case contract.ExitInterrupted:
		// The child stopped mid-write: the card holds part of the image.
		return target == context.Canceled || target == imaging.ErrIncomplete
	}
	return false
}

// Run starts cmd, calls on (when not nil) for every event line of its
// stdout (other lines are skipped) and waits for it. Cancelling ctx closes
// the child's stdin and interrupts it (SIGINT, then a kill after a grace
// period; both fail for a root child, the stdin close does not) and returns
// ctx's error.
// A failure is an *Error: the child's "error" line, else its exit status
// with the start of its stderr; an exit 0 without a "result" line too. A
// child that cannot start is ErrStart. cmd.Stderr is captured unless the
// caller set it; cmd.Stdout must be unset.
func Run(ctx context.Context, cmd *exec.Cmd, on func(contract.Event)) error {
	return RunFed(ctx, cmd, on, nil)
}

// RunFed is Run with feed writing to the child's stdin while it runs (the
// images, SendImages); closing stdin still cancels the child. feed's context
// ends once the child has exited (or ctx ended): a feed waiting on its own
// source returns then. A feed that fails closes the child's stdin, so the
// child stops, and its error is the run's (what the child says then is a
// consequence). RunFed returns after feed has.
func RunFed(ctx context.Context, cmd *exec.Cmd, on func(contract.Event), feed func(context.Context, io.Writer) error) error {
	var childErr *Error
	sawResult := false
	lines := &lineWriter{max: 1 << 20, on: func(line []byte) {
		ev, ok := contract.Decode(line)
		if !ok {
			return // not ours (e.g. a stray log line)
		}
		switch ev.Type {
		case contract.TypeError:
			if ev.Error.Device == "" { // a card's own failure is for on
				childErr = &Error{Code: ev.Error.Code, Message: ev.Error.Message, Reported: true}
			}
		case contract.TypeResult:
			sawResult = true
		}
		if on != nil {
			on(ev)
		}
	}}
	// exec copies the output in its own goroutines and Wait waits for
	// them, at most pipeWait once the child has exited.
	cmd.Stdout = lines
	var stderr bytes.Buffer
	if cmd.Stderr == nil {
		cmd.Stderr = &limitedBuffer{buf: &stderr, max: 8 << 10}
	}
	cmd.WaitDelay = pipeWait
	// The child (talosflash --elevated) cancels itself when its stdin
	// closes. That works across the privilege boundary, where a signal
	// from the user to the root child is refused.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStart, err)
	}
	setPipeSize(stdin) // the image goes through it
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: %w", ErrStart, err)
	}
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	feedDone := make(chan error, 1)
	if feed != nil {
		go func() {
			err := feed(feedCtx, stdin)
			if err != nil {
				_ = stdin.Close() // the child stops: its image failed
			}
			feedDone <- err
		}()
	} else {
		feedDone <- nil
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

	waitErr := cmd.Wait()
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		waitErr = nil // exited cleanly; something it left behind held the output open
	}
	lines.flush()
	var feedErr error
	select {
	case feedErr = <-feedDone: // ended (or failed) while the child ran
	default:
		stopFeed() // the child exited first: what the feed says now is that
		_ = stdin.Close()
		<-feedDone
	}
	_ = stdin.Close()
	close(stopWatch)
	<-watched

	switch {
	case ctx.Err() != nil && childErr != nil:
		// The child's own words say how far it got ("interrupted after N
		// bytes ... incomplete"); the cause stays the caller's cancel.
		return fmt.Errorf("%w (%w)", childErr, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("elevated write interrupted (%w): the card may hold part of the image: %w", ctx.Err(), imaging.ErrIncomplete)
	case feedErr != nil:
		return feedErr
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

// lineWriter calls on for every complete line written to it; a line longer
// than max is dropped whole (never buffered without bound). Only exec's
// copying goroutine writes to it.
type lineWriter struct {
	max      int
	on       func([]byte)
	buf      []byte
	overlong bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.overlong {
			if len(l.buf)+len(chunk) > l.max {
				l.overlong, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !l.overlong {
			l.on(l.buf)
		}
		l.buf, l.overlong = l.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// flush hands on a last line without a newline.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 && !l.overlong {
		l.on(l.buf)
	}
	l.buf = nil
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
