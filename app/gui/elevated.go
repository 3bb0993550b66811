package gui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

// ElevatedArgs is the CLI invocation that writes an already downloaded image
// as root and reports JSON lines on stdout (see runElevated).
func ElevatedArgs(imagePath, device string) []string {
	return []string{"--flash", "--image", imagePath, "--device", device, "--yes", "--json"}
}

// elevatedEvent is one JSON line of `talosflash --flash --json`.
type elevatedEvent struct {
	Event      string  `json:"event"` // progress, result, error, info
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
}

// ElevatedError is a failure the elevated child reported (or its exit).
type ElevatedError struct {
	Code    int // the CLI's exit code
	Message string
}

func (e *ElevatedError) Error() string {
	return fmt.Sprintf("elevated write failed (exit code %d): %s", e.Code, e.Message)
}

// Is maps the CLI's exit codes back to the library's sentinel errors so the
// dialogs give the same hints as for an in-process flash.
func (e *ElevatedError) Is(target error) bool {
	switch e.Code {
	case 4:
		return target == imaging.ErrVerifyMismatch
	case 6:
		return target == imaging.ErrIncomplete
	case 130:
		return target == context.Canceled
	}
	return false
}

// runElevated re-runs talosflash as root to write imagePath to device and
// translates its JSON progress lines. Cancelling ctx interrupts the child
// (SIGINT, then a kill after a grace period).
func runElevated(ctx context.Context, command func([]string) (*exec.Cmd, error), imagePath, device string, progress imaging.ProgressFunc) (*imaging.Result, error) {
	cmd, err := command(ElevatedArgs(imagePath, device))
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start elevated write: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 8 << 10}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start elevated write: %w", err)
	}

	stopWatch := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-stopWatch:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
			}
		case <-stopWatch:
		}
	}()

	var res *imaging.Result
	var childErr *ElevatedError
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev elevatedEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // not ours (e.g. a stray log line)
		}
		switch ev.Event {
		case "progress":
			if progress != nil {
				progress(imaging.Progress{
					Stage: imaging.Stage(ev.Stage), Done: ev.Done, Total: ev.Total,
					Rate: ev.Rate, ETA: time.Duration(ev.ETASeconds * float64(time.Second)),
				})
			}
		case "result":
			res = &imaging.Result{Bytes: ev.Bytes, SHA256: ev.SHA256, Verified: ev.Verified, Path: imagePath}
		case "error":
			childErr = &ElevatedError{Code: ev.Code, Message: ev.Message}
		}
	}
	waitErr := cmd.Wait()
	close(stopWatch)

	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("elevated write: %w", ctx.Err())
	case childErr != nil:
		return res, childErr
	case waitErr != nil:
		var exit *exec.ExitError
		code := -1
		if errors.As(waitErr, &exit) {
			code = exit.ExitCode()
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = waitErr.Error()
		}
		if code == 126 || code == 127 {
			msg = "administrator rights were not granted (" + msg + ")"
		}
		return res, &ElevatedError{Code: code, Message: msg}
	case res == nil:
		return nil, &ElevatedError{Code: -1, Message: "the elevated write ended without reporting a result"}
	}
	return res, nil
}

// limitedBuffer keeps the first max bytes of the child's stderr.
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
