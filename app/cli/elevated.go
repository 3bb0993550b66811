package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
)

// ElevatedFileTargets lets the elevated child write regular files, new ones
// included (the unprivileged flash creates one only with --create-file,
// which is no flag of the child). Tests only (their child runs as the test
// user on files): no flag or environment variable sets it, so the root
// child of a real run writes block devices only.
var ElevatedFileTargets = false

// underPkexec says this process runs as root through pkexec (which sets
// PKEXEC_UID to its caller's uid).
func underPkexec() bool { return os.Geteuid() == 0 && os.Getenv("PKEXEC_UID") != "" }

// UnderPkexec is underPkexec for main: the app is never started so.
func UnderPkexec() bool { return underPkexec() }

// pkexecGate refuses, under pkexec, everything but the elevated write of
// a flash (the command line elevate.Args.List starts with): the polkit
// action names this program and asks for the administrator's password to
// "write the image to the SD card", and any program the user runs can ask
// pkexec for it with arguments of its own (another command reading a
// root-only file and quoting it, writing a file as root).
func pkexecGate(args []string) error {
	if !underPkexec() || len(args) >= 2 && args[0] == "--flash" && args[1] == "--elevated" {
		return nil
	}
	return usageErrorf("under pkexec talosflash runs only the elevated write of a flash started by talosflash itself (talosflash --flash --elevated ...)")
}

// afterElevatedGate runs once the root child's gate passed (tests swap its
// target there).
var afterElevatedGate = func() {}

// checkElevated is the root child's gate, before it opens, reads or creates
// anything: it runs as root on its command line, which anyone allowed to
// run pkexec chooses. It takes exactly the flags elevate.Args.List emits
// (no image path: the image comes on stdin, elevate.ReceiveImage),
// absolute paths and block devices (existing; stat only, never an open or
// a create).
func checkElevated(fs *flag.FlagSet, f *flashFlags) error {
	var bad []string
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		given[fl.Name] = true
		if _, ok := elevate.ChildFlags[fl.Name]; !ok {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return usageErrorf("--elevated: %s is not a flag of the elevated write (it takes only what talosflash itself passes it; the image comes on stdin)", strings.Join(bad, ", "))
	}
	for name, required := range elevate.ChildFlags {
		if required && !given[name] {
			return usageErrorf("--elevated: --%s is required", name)
		}
	}
	if fs.NArg() > 0 {
		return usageErrorf("--elevated: unexpected argument %q", fs.Arg(0))
	}
	if !f.yes || !f.jsonOut || !f.elevated {
		return usageErrorf("--elevated: --elevated, --yes and --json are required")
	}
	for _, d := range f.devices {
		if err := elevatedTarget(d); err != nil {
			return err
		}
	}
	afterElevatedGate()
	return nil
}

// elevatedTarget refuses a target that is not an existing block device:
// a regular file written as root would plant or overwrite any file. Stat
// follows a symlink and never creates or opens anything. It is the early
// word only: a symlink may name a file by the time of the open, which
// devices.Options.BlockOnly refuses there.
func elevatedTarget(d string) error {
	if ElevatedFileTargets {
		return nil
	}
	if !filepath.IsAbs(d) {
		return usageErrorf("--elevated: --device %q is not an absolute path", d)
	}
	if runtime.GOOS == "windows" {
		if !strings.HasPrefix(d, `\\.\`) {
			return usageErrorf("--elevated: --device %s is not a disk", d)
		}
		return nil // the Windows backend judges its disk names itself
	}
	fi, err := os.Stat(d)
	if err != nil {
		return withCode(contract.ExitUsage, fmt.Errorf("--elevated: --device: %w", err))
	}
	if fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		return usageErrorf("--elevated: --device %s is not a block device (%v)", d, fi.Mode().Type())
	}
	return nil
}
