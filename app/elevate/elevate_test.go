package elevate

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

func sh(script string) *exec.Cmd { return exec.Command("sh", "-c", script) }

func TestRunParsesLines(t *testing.T) {
	script := `echo '{"event":"progress","stage":"write","done":512,"total":1024,"rate":2048,"eta_seconds":3}'
echo 'a stray log line'
echo '{"event":"info","message":"hello"}'
echo '{"event":"result","bytes":1024,"sha256":"abc","verified":true,"verify_mode":"O_DIRECT"}'`
	var got []Event
	if err := Run(context.Background(), sh(script), func(ev Event) { got = append(got, ev) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Event != "progress" || got[1].Message != "hello" || got[2].Event != "result" {
		t.Fatalf("events %+v", got)
	}
	p := got[0].Progress()
	if p.Stage != imaging.StageWrite || p.Done != 512 || p.Total != 1024 || p.Rate != 2048 || p.ETA != 3*time.Second {
		t.Fatalf("progress %+v", p)
	}
	r := got[2]
	if r.Bytes != 1024 || r.SHA256 != "abc" || !r.Verified || r.VerifyMode != "O_DIRECT" || !strings.Contains(string(r.Line), `"sha256":"abc"`) {
		t.Fatalf("result %+v", r)
	}
}

func TestRunErrors(t *testing.T) {
	var ee *Error
	err := Run(context.Background(), sh(`echo '{"event":"error","code":4,"message":"verify mismatch at 4096"}'; exit 4`), nil)
	if !errors.As(err, &ee) || !ee.Reported || ee.Code != 4 || ee.Message != "verify mismatch at 4096" || !errors.Is(err, imaging.ErrVerifyMismatch) {
		t.Fatalf("reported error: %v", err)
	}
	err = Run(context.Background(), sh(`echo 'pkexec: not authorized' >&2; exit 126`), nil)
	if !errors.As(err, &ee) || ee.Reported || !ee.NotGranted || ee.Code != 126 || !strings.Contains(ee.Message, "not authorized") {
		t.Fatalf("dismissed: %v", err)
	}
	err = Run(context.Background(), sh(`exit 3`), nil)
	if !errors.As(err, &ee) || ee.NotGranted || ee.Code != 3 || ee.Message == "" {
		t.Fatalf("plain exit: %v", err)
	}
	err = Run(context.Background(), sh(`true`), nil)
	if !errors.As(err, &ee) || !strings.Contains(ee.Message, "without reporting a result") {
		t.Fatalf("no result: %v", err)
	}
	err = Run(context.Background(), exec.Command("/nonexistent/talosflash"), nil)
	if err == nil || errors.As(err, &ee) {
		t.Fatalf("start failure: %v", err)
	}
}

// A line longer than the scanner takes must not leave the child blocked on
// a full pipe: Run still returns when it exits.
func TestRunOverlongLine(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), sh(`head -c 3000000 /dev/zero | tr '\0' x; echo; head -c 200000 /dev/zero | tr '\0' y; echo; exit 6`), nil)
	}()
	select {
	case err := <-done:
		var ee *Error
		if !errors.As(err, &ee) || ee.Code != 6 || !errors.Is(err, imaging.ErrIncomplete) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run hung on an over-long line")
	}
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	// Like the real child, the script stops on SIGINT (a plain `sh -c
	// 'sleep 5'` waits for sleep before acting on it).
	err := Run(ctx, sh(`trap 'exit 130' INT; sleep 5 & wait`), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("cancel took %s", time.Since(start))
	}
}

// A root child under pkexec can't be signalled by the user: cancelling must
// still stop it, through its stdin.
func TestRunCancelThroughStdin(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := Run(ctx, sh(`trap '' INT; cat >/dev/null; exit 130`), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("cancel through stdin took %s", time.Since(start))
	}
}

func TestErrorIs(t *testing.T) {
	for code, target := range map[int]error{4: imaging.ErrVerifyMismatch, 6: imaging.ErrIncomplete, 9: imaging.ErrCorruptImage, 130: context.Canceled} {
		if !errors.Is(&Error{Code: code}, target) {
			t.Errorf("code %d does not match %v", code, target)
		}
	}
	if errors.Is(&Error{Code: 5}, imaging.ErrIncomplete) {
		t.Error("code 5 matches ErrIncomplete")
	}
}
