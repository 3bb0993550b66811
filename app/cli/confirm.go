package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"
)

// isTerminal reports whether f is an interactive terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// stdinIsTerminal is isTerminal for the confirmation's input (tests
// replace it to drive the prompt through a pipe).
var stdinIsTerminal = isTerminal

// confirmDevice asks the user to type the device's name, the same guard
// rpi-imager and dd wrappers lack: a typo'd "y" can't destroy a disk. A
// signal (Ctrl-C) while it waits ends it: the read is left behind.
func confirmDevice(ctx context.Context, in io.Reader, out io.Writer, device, summary string) error {
	if !stdinIsTerminal(in) {
		return usageErrorf("refusing to write %s without confirmation: no terminal to ask on; pass --yes to confirm in scripts", device)
	}
	want := filepath.Base(device)
	fmt.Fprintf(out, "About to ERASE %s\n  %s\nType %q (or %s) to continue: ", device, summary, want, device)
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(in).ReadString('\n')
		got <- answer{line, err}
	}()
	var line string
	var err error
	select {
	case <-ctx.Done():
		fmt.Fprintln(out)
		return fmt.Errorf("confirmation interrupted; nothing was written: %w", ctx.Err())
	case a := <-got:
		line, err = a.line, a.err
	}
	if err != nil && line == "" {
		return usageErrorf("confirmation aborted")
	}
	// The name shown, or the path the user typed after --device.
	if typed := strings.TrimSpace(line); typed != want && typed != device {
		return usageErrorf("confirmation did not match %q (or %s); nothing was written", want, device)
	}
	return nil
}
