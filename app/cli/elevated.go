package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging"
)

// ElevatedFileTargets lets the elevated child write regular files, new ones
// included (the unprivileged flash creates one only with --create-file,
// which is no flag of the child). Tests only (their child runs as the test
// user on files): no flag or environment variable sets it, so the root
// child of a real run writes block devices only.
var ElevatedFileTargets = false

// checkElevated is the root child's gate, before it opens, reads or creates
// anything: it runs as root on its command line, which anyone allowed to
// run pkexec chooses. It takes exactly the flags elevate.Args.List emits,
// absolute paths, block devices (existing; stat only, never an open or a
// create) and an image the invoking user can read themselves, opened once
// here (as that user) and read through that descriptor.
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
		return usageErrorf("--elevated: %s is not a flag of the elevated write (it takes only what talosflash itself passes it)", strings.Join(bad, ", "))
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
	if !filepath.IsAbs(f.image) {
		return usageErrorf("--elevated: --image %q is not an absolute path", f.image)
	}
	if f.follow {
		f.image = imaging.FollowedPath(f.image) // the download may have completed before we started
	}
	img, err := openAsInvoker(f.image)
	if f.follow && errors.Is(err, os.ErrNotExist) {
		img, err = openAsInvoker(imaging.FollowedPath(f.image)) // renamed into place meanwhile: the same file
	}
	if err != nil {
		return withCode(contract.ExitUsage, fmt.Errorf("--elevated: image: %w", err))
	}
	f.imageFile, f.imageName = img, f.image
	f.image = fdPath(img)
	return nil
}

// elevatedTarget refuses a target that is not an existing block device:
// a regular file written as root would plant or overwrite any file. Stat
// follows a symlink (to the device it names, which Check and Open then
// judge as that device) and never creates or opens anything.
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

// invokerUID is the user who ran pkexec (or sudo) to start this root
// process, when there is one: pkexec sets PKEXEC_UID itself after clearing
// the environment.
func invokerUID() (int, bool) {
	if os.Geteuid() != 0 {
		return 0, false // not root: the process's own rights are the user's
	}
	for _, name := range []string{"PKEXEC_UID", "SUDO_UID"} {
		if v := os.Getenv(name); v != "" {
			uid, err := strconv.Atoi(v)
			if err != nil || uid < 0 {
				return -1, true // unusable: openAsInvoker refuses
			}
			return uid, true
		}
	}
	return 0, false
}

// openImage opens a regular file for reading, never blocking on a FIFO and
// never reading anything.
func openImage(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	return f, nil
}
