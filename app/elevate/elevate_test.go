package elevate

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging"
)

func sh(script string) *exec.Cmd { return exec.Command("sh", "-c", script) }

func TestRunParsesLines(t *testing.T) {
	script := `echo '{"event":"progress","stage":"write","done":512,"total":1024,"rate":2048,"eta_seconds":3,"compressed":true}'
echo 'a stray log line'
echo '{"event":"info","message":"hello"}'
printf '{"event":"result","bytes":1024,"sha256":"abc","verified":true,"verify_mode":"O_DIRECT"}'`
	var got []contract.Event
	if err := Run(context.Background(), sh(script), func(ev contract.Event) { got = append(got, ev) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Type != contract.TypeProgress || got[1].Message.Message != "hello" || got[2].Type != contract.TypeResult {
		t.Fatalf("events %+v", got)
	}
	p := got[0].Progress.Progress()
	if p.Stage != imaging.StageWrite || p.Done != 512 || p.Total != 1024 || p.Rate != 2048 || p.ETA != 3*time.Second || !p.Compressed {
		t.Fatalf("progress %+v", p)
	}
	r := got[2].Result // the last line has no newline
	if r.Bytes != 1024 || r.SHA256 != "abc" || !r.Verified || r.VerifyMode != "O_DIRECT" {
		t.Fatalf("result %+v", r)
	}
}

func TestArgs(t *testing.T) {
	a := Args{Devices: []string{"/dev/sdz"}, NoVerify: true, AllowLoop: true}
	got := a.List()
	want := []string{"--flash", "--elevated", "--device", "/dev/sdz", "--yes", "--json", "--no-verify", "--allow-loop"}
	if !slices.Equal(got, want) {
		t.Fatalf("args %q, want %q", got, want)
	}
	// A person runs the whole flash as root, on the image file.
	human := []string{"--flash", "--image", "/c/img.raw.xz", "--device", "/dev/sdz", "--no-verify", "--allow-loop"}
	if got := a.Human("/c/img.raw.xz"); !slices.Equal(got, human) {
		t.Fatalf("human %q, want %q", got, human)
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
	if !errors.Is(err, ErrStart) || errors.As(err, &ee) {
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

// A child that exits while something it started still holds its stdout
// (pkexec helpers, a background job) must not keep Run waiting for that.
func TestRunChildExitsGrandchildHoldsOutput(t *testing.T) {
	start := time.Now()
	err := Run(context.Background(), sh(`sleep 30 & echo '{"event":"result","bytes":1}'; exit 0`), nil)
	if err != nil {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Run returned after %s: it waited for the grandchild", d)
	}
}

// Cancelling once the child has a background job holding its stdout: the
// child stops on SIGINT, its job lives on, Run returns anyway.
func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	// Like the real child, the script stops on SIGINT (a plain `sh -c
	// 'sleep 5'` waits for sleep before acting on it).
	err := Run(ctx, sh(`trap 'exit 130' INT; sleep 5 & echo '{"event":"info","message":"started"}'; wait`), func(ev contract.Event) {
		if ev.Type == contract.TypeInfo {
			cancel()
		}
	})
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

// A cancel after the child reported how far it got keeps the child's words
// (the card is incomplete) and the cancel as the cause.
func TestRunCancelKeepsChildReport(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	err := Run(ctx, sh(`trap '' INT; cat >/dev/null
echo '{"event":"error","code":130,"message":"flash interrupted after 5 bytes (context canceled): the target is incomplete"}'; exit 130`), nil)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, imaging.ErrIncomplete) {
		t.Fatalf("err %v: want context.Canceled and ErrIncomplete", err)
	}
	if !strings.Contains(err.Error(), "interrupted after 5 bytes") || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("err %q lost the child's report", err)
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

// Several cards: one --device each; a card's own "error" line (with a
// device) is relayed to on and is not the run's failure, the final one is.
func TestRunSeveralCards(t *testing.T) {
	got := Args{Devices: []string{"/dev/sdy", "/dev/sdz"}}.List()
	want := []string{"--flash", "--elevated", "--device", "/dev/sdy", "--device", "/dev/sdz", "--yes", "--json"}
	if !slices.Equal(got, want) {
		t.Fatalf("args %q, want %q", got, want)
	}
	var cards []string
	on := func(ev contract.Event) {
		switch {
		case ev.Type == contract.TypeResult:
			cards = append(cards, "ok "+ev.Result.Device)
		case ev.Type == contract.TypeError && ev.Error.Device != "":
			cards = append(cards, "failed "+ev.Error.Device)
		}
	}
	err := Run(context.Background(), sh(`echo '{"event":"result","device":"/dev/sdy","bytes":1}'; echo '{"event":"error","code":6,"message":"EIO","device":"/dev/sdz"}'; echo '{"event":"error","code":6,"message":"1 of 2 cards failed"}'; exit 6`), on)
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != 6 || ee.Message != "1 of 2 cards failed" {
		t.Fatalf("run: %v", err)
	}
	if !slices.Equal(cards, []string{"ok /dev/sdy", "failed /dev/sdz"}) {
		t.Fatalf("cards %q", cards)
	}
	// All good: results only, no final error.
	cards = nil
	if err := Run(context.Background(), sh(`echo '{"event":"result","device":"/dev/sdy"}'; echo '{"event":"result","device":"/dev/sdz"}'`), on); err != nil || len(cards) != 2 {
		t.Fatalf("all good: %v, %q", err, cards)
	}
}

// A card's node META goes to the child as a value paired with its device,
// and only for the cards that have one.
func TestArgsNodeMeta(t *testing.T) {
	got := Args{Devices: []string{"/dev/sdy", "/dev/sdz"}, Meta: []string{"", "QUJD"}}.List()
	want := []string{"--flash", "--elevated", "--device", "/dev/sdy", "--device", "/dev/sdz", "--node-meta", "/dev/sdz=QUJD", "--yes", "--json"}
	if !slices.Equal(got, want) {
		t.Fatalf("args %q, want %q", got, want)
	}
}

// Several images: each card names its image on stdin; the command for a
// person (Human) is one image's and leaves them out.
func TestArgsImages(t *testing.T) {
	a := Args{Devices: []string{"/dev/sdx", "/dev/sdy"}, Images: []int{1, 0}}
	want := []string{"--flash", "--elevated", "--device", "/dev/sdx", "--device", "/dev/sdy", "--card-image", "/dev/sdx=1", "--card-image", "/dev/sdy=0", "--yes", "--json"}
	if got := a.List(); !slices.Equal(got, want) {
		t.Fatalf("args %q, want %q", got, want)
	}
	if got := a.Human("/i.raw.zst"); slices.Contains(got, "--card-image") {
		t.Fatalf("human %q", got)
	}
}

// The child accepts only what List emits (ChildFlags), and List emits
// every one of them for a job that uses them all, the required ones always.
func TestChildFlagsAreWhatListEmits(t *testing.T) {
	all := Args{Devices: []string{"/dev/a", "/dev/b"}, Meta: []string{"m", ""}, NoVerify: true,
		ForceNonRemovable: true, AllowLoop: true, Images: []int{0, 1}}
	seen := map[string]bool{}
	list := all.List()
	if list[0] != "--flash" {
		t.Fatalf("List starts %q", list[0])
	}
	for _, a := range list[1:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			if _, known := ChildFlags[name]; !known {
				t.Errorf("List emits --%s, which the child refuses", name)
			}
			seen[name] = true
		}
	}
	minimal := map[string]bool{}
	for _, a := range (Args{Devices: []string{"/dev/a"}}).List() {
		minimal[strings.TrimPrefix(a, "--")] = true
	}
	for name, required := range ChildFlags {
		if !seen[name] {
			t.Errorf("the child accepts --%s, which List never emits", name)
		}
		if required != minimal[name] {
			t.Errorf("--%s: required %v, but a minimal List emits it: %v", name, required, minimal[name])
		}
	}
}
