package gui

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"testing"

	"github.com/talosflash/talosflash/imaging"
)

// fakeChild returns a command builder that runs script with sh and records
// the arguments it was given.
func fakeChild(script string, gotArgs *[]string) func([]string) (*exec.Cmd, error) {
	return func(args []string) (*exec.Cmd, error) {
		*gotArgs = args
		return exec.Command("sh", "-c", script), nil
	}
}

func TestRunElevatedParsesProgressAndResult(t *testing.T) {
	var args []string
	script := `echo '{"event":"progress","stage":"write","done":512,"total":1024,"rate":2048,"eta_seconds":3}'
echo 'a stray log line'
echo '{"event":"progress","stage":"verify","done":1024,"total":1024,"rate":4096,"eta_seconds":0}'
echo '{"event":"result","bytes":1024,"sha256":"abc","verified":true}'`
	var got []imaging.Progress
	res, err := runElevated(context.Background(), fakeChild(script, &args), "/cache/img.raw.xz", "/dev/sdz", func(p imaging.Progress) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--flash", "--elevated", "--image", "/cache/img.raw.xz", "--device", "/dev/sdz", "--yes", "--json"}
	if !slices.Equal(args, want) {
		t.Fatalf("child args %q, want %q", args, want)
	}
	if len(got) != 2 || got[0].Stage != imaging.StageWrite || got[0].Done != 512 || got[0].ETA.Seconds() != 3 || got[1].Stage != imaging.StageVerify {
		t.Fatalf("progress %+v", got)
	}
	if res.Bytes != 1024 || !res.Verified || res.SHA256 != "abc" {
		t.Fatalf("result %+v", res)
	}
}

func TestRunElevatedReportsChildError(t *testing.T) {
	var args []string
	script := `echo '{"event":"error","code":4,"message":"verify mismatch at 4096"}'; exit 4`
	_, err := runElevated(context.Background(), fakeChild(script, &args), "/x", "/dev/sdz", nil)
	var ee *ElevatedError
	if !errors.As(err, &ee) || ee.Code != 4 || !errors.Is(err, imaging.ErrVerifyMismatch) {
		t.Fatalf("err %v", err)
	}
	// Exit without any JSON: stderr becomes the message.
	_, err = runElevated(context.Background(), fakeChild(`echo 'pkexec: not authorized' >&2; exit 126`, &args), "/x", "/dev/sdz", nil)
	if !errors.As(err, &ee) || ee.Code != 126 || ee.Message == "" {
		t.Fatalf("err %v", err)
	}
}

func TestRunElevatedCancel(t *testing.T) {
	var args []string
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := runElevated(ctx, fakeChild(`sleep 5`, &args), "/x", "/dev/sdz", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}
