package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
)

// sendImage sends img (a file, decoded here as the parent decodes it) on
// w as the parent does (elevate.SendImages, one image).
func sendImage(t *testing.T, w io.Writer, img string) elevate.Sent {
	t.Helper()
	d, err := imaging.OpenDecoded(context.Background(), imaging.Source{Path: img}, nil, false, nil)
	if err != nil {
		t.Error(err)
		return elevate.Sent{}
	}
	defer d.Close()
	sent, errs := elevate.SendImages(w, []io.Reader{d}, []int64{d.Size()})
	if errs[0] != nil {
		t.Error(errs[0])
	}
	return sent[0]
}

// childRun runs the elevated child (this package's Main, in process) as
// its parent would: img sent on its stdin, which stays open until it
// returns.
func childRun(t *testing.T, args elevate.Args, img string) (int, string, string) {
	t.Helper()
	return childRunWire(t, args.List(), func(w io.Writer) { sendImage(t, w, img) })
}

// childRunWire is childRun with send writing the child's stdin.
func childRunWire(t *testing.T, args []string, send func(io.Writer)) (int, string, string) {
	t.Helper()
	pr, pw := io.Pipe()
	defer pw.Close()
	defer pr.Close() // a send the child no longer reads fails
	go send(pw)
	var out, errOut strings.Builder
	code := Main(args, Env{Stdin: pr, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// realChild is a plan.Job.Elevate whose child is this test binary run as
// talosflash (TestMain), a real process reading its stdin as the child
// does; args, when not nil, records what it was told.
func realChild(args *[]string) func([]string) (*exec.Cmd, error) {
	return func(a []string) (*exec.Cmd, error) {
		if args != nil {
			*args = a
		}
		cmd := exec.Command(os.Args[0], a...)
		cmd.Env = append(os.Environ(), "TALOSFLASH_CLI_TEST_MAIN=1")
		return cmd, nil
	}
}

// elevatedFlash flashes img onto devs through a real elevated child, as
// the CLI's parent does, and returns the exit code the CLI would end
// with, no stdout (the child's is read by the parent) and the errors.
func elevatedFlash(t *testing.T, img string, devs ...string) (int, string, string) {
	t.Helper()
	out, err := plan.Flash(context.Background(), plan.Job{
		Image: plan.FromFile(img), Devices: devs,
		NeedsElevation: func(string) bool { return true },
		Elevate:        realChild(nil),
	})
	if err == nil {
		return contract.ExitOK, "", ""
	}
	msg := err.Error()
	var ce *plan.CardsError
	if errors.As(err, &ce) && out != nil {
		for _, c := range out.Cards {
			if c.Err != nil {
				msg += "\n" + c.Target + ": " + c.Err.Error()
			}
		}
	}
	return exitCode(err), "", msg
}
