package devices

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A file the kernel holds busy (here a program running from it; an
// active swap file is the other case) is the safety rules' refusal,
// CodeBusy (exit 5), not the open's "text file busy" (exit 1).
func TestOpenBusyImageFileIsRefused(t *testing.T) {
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	img := filepath.Join(t.TempDir(), "running.img")
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(img, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(out, io.LimitReader(in, 64<<20))
	in.Close()
	if cerr := out.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	cmd := exec.Command(img, "30")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot run a program from the temp dir:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var l Lister
	_, err = l.Open(img, 0, Options{})
	var r *RefusedError
	if !errors.As(err, &r) || r.Reason != CodeBusy {
		t.Fatalf("Open: %v, want a busy refusal", err)
	}
}
