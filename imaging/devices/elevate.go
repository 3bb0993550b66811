package devices

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ElevationError explains how to get root when talosflash cannot ask for it.
type ElevationError struct {
	Command string // the command line to run by hand: "sudo /usr/bin/talosflash ..."
	Reason  string
}

func (e *ElevationError) Error() string {
	return fmt.Sprintf("%s; run it as root instead: %s", e.Reason, e.Command)
}

// ElevatedCommand returns a command that re-runs this executable with args as
// root: through pkexec (polkit, asks for the password in the desktop session)
// when it is installed, directly when already root. pkexec clears the
// environment, so everything the child needs must be in args (the CLI
// passes the cached image with --image, so download and cache stay with the
// normal user and only the write step runs elevated). Without pkexec the
// error (an *ElevationError) gives the sudo command line to run by hand.
func ElevatedCommand(args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to re-run elevated: %w", err)
	}
	if platformElevate != nil {
		return platformElevate(exe, args)
	}
	if os.Geteuid() == 0 {
		return exec.Command(exe, args...), nil
	}
	if pk, err := exec.LookPath("pkexec"); err == nil {
		return exec.Command(pk, append([]string{exe}, args...)...), nil
	}
	return nil, &ElevationError{
		Command: ShellJoin(append([]string{"sudo", exe}, args...)),
		Reason:  "writing to a disk needs root and pkexec (polkit) is not installed",
	}
}

// platformElevate replaces pkexec on systems with their own way to ask for
// administrator rights (set by the macOS and Windows backends).
var platformElevate func(exe string, args []string) (*exec.Cmd, error)

// ShellJoin quotes args for a POSIX shell so a suggested command can be
// pasted as is.
func ShellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
			quoted[i] = a
		} else {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}
