package cli

import (
	"bufio"
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

// confirmDevice asks the user to type the device's name, the same guard
// rpi-imager and dd wrappers lack: a typo'd "y" can't destroy a disk.
func confirmDevice(in io.Reader, out io.Writer, device, summary string) error {
	if !isTerminal(in) {
		return usageErrorf("refusing to write %s without confirmation: no terminal to ask on; pass --yes to confirm in scripts", device)
	}
	want := filepath.Base(device)
	fmt.Fprintf(out, "About to ERASE %s\n  %s\nType %q to continue: ", device, summary, want)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return usageErrorf("confirmation aborted")
	}
	if strings.TrimSpace(line) != want {
		return usageErrorf("confirmation did not match %q; nothing was written", want)
	}
	return nil
}
