package devices

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
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
// environment and closes every descriptor above 2, so everything the
// child needs is in args and on its stdin (app/elevate: the image comes
// decoded on stdin, so download, cache and decoders stay with the normal
// user and only the write step runs elevated). Without pkexec the
// error (an *ElevationError) gives the sudo command line to run by hand.
// ElevatedCommandFor(version) may run the cgo-free CLI instead.
func ElevatedCommand(args []string) (*exec.Cmd, error) {
	return elevatedCommand("", args)
}

// ElevatedCommandFor is ElevatedCommand for an app of this version (the
// build's, app/cli.Version): the root child is the cgo-free CLI
// (talosflash-cli) when one of the same version is installed beside the app
// or in /usr/lib/talosflash (ElevatedProgram), so the process that writes
// the card does not load the desktop app's libraries (issue 22: its peak
// RSS stays under 64 MiB). The child's arguments are the same either way.
func ElevatedCommandFor(version string) func(args []string) (*exec.Cmd, error) {
	return func(args []string) (*exec.Cmd, error) { return elevatedCommand(version, args) }
}

func elevatedCommand(version string, args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to re-run elevated: %w", err)
	}
	if version != "" {
		exe = ElevatedProgram(exe, version, CLICandidates(exe))
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

// CLIName is the file name of the cgo-free CLI (`make build-cli`, the .deb).
const CLIName = "talosflash-cli"

// InstalledCLI is where the .deb installs the CLI for the elevated write
// (packaging/linux/nfpm.yaml; the polkit policy names it).
const InstalledCLI = "/usr/lib/talosflash/" + CLIName

// CLICandidates are the places ElevatedProgram looks for the CLI of the app
// at path app, in order: beside it, then (Linux) where the .deb puts it.
func CLICandidates(app string) []string {
	c := []string{filepath.Join(filepath.Dir(app), CLIName)}
	if runtime.GOOS == "linux" {
		c = append(c, InstalledCLI)
	}
	return c
}

// ElevatedProgram decides which binary the elevated write runs: the first
// candidate that UsableCLI accepts for an app of this version at path app,
// else the app itself (as before the CLI existed).
func ElevatedProgram(app, version string, candidates []string) string {
	for _, c := range candidates {
		if UsableCLI(app, version, c) == nil {
			return c
		}
	}
	return app
}

// devStamp is a dev version stamped by `make build` (its UTC time and 32
// random bits): one build's, where a constant suffix would name many.
var devStamp = regexp.MustCompile(`-dev\+[0-9]{15,}$`)

// UsableCLI says why the file at path must not replace the app as the
// root child, nil when it may: it is a regular file (not a symlink),
// executable, writable by its owner only, owned by root or by the app's
// owner (so a root-owned app only takes a root-owned CLI), in a directory
// only that owner or root can change (nobody but who could replace the app
// itself can swap it between this check and pkexec), and `path version`
// prints this version. A bare "-dev" version does not name one build (a
// stale `make build-cli` would print the same): it never uses the CLI;
// `make build` stamps the app and the CLI it builds beside it with one
// "-dev+<stamp>" of that build, which names it.
func UsableCLI(app, version, path string) error {
	if version == "" || strings.Contains(version, "-dev") && !devStamp.MatchString(version) {
		return fmt.Errorf("version %q does not identify a build", version)
	}
	appInfo, err := os.Stat(app)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if os.SameFile(appInfo, fi) {
		return errors.New("is the app itself")
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o100 == 0 {
		return fmt.Errorf("%s is not executable", path)
	}
	appOwner, ok := fileOwner(appInfo)
	if !ok {
		return errors.New("file owners are not known on this system")
	}
	if err := ownedSafely(path, fi, appOwner); err != nil {
		return err
	}
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return err
	}
	if err := ownedSafely(filepath.Dir(path), dir, appOwner); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version")
	var out boundedBuffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s version: %w", path, err)
	}
	if got, want := strings.TrimSpace(string(out.b)), "talosflash "+version; got != want {
		return fmt.Errorf("%s is %q, the app is %q", path, got, want)
	}
	return nil
}

// ownedSafely refuses a file or directory that someone other than root or
// owner could change.
func ownedSafely(path string, fi os.FileInfo, owner uint32) error {
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (%v)", path, fi.Mode().Perm())
	}
	if uid, ok := fileOwner(fi); !ok || (uid != 0 && uid != owner) {
		return fmt.Errorf("%s is owned by uid %d, not root or the app's owner %d", path, uid, owner)
	}
	return nil
}

// boundedBuffer keeps the first 4 KiB written to it (a version line).
type boundedBuffer struct{ b []byte }

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
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
