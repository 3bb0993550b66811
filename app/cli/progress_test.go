package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

func TestTermReporterLines(t *testing.T) {
	var out bytes.Buffer
	r := newTermReporter(&out, false)
	const total = 1 << 30
	r.Progress(imaging.Progress{Stage: imaging.StageWrite, Total: total})
	r.Progress(imaging.Progress{Stage: imaging.StageWrite, Done: total / 2, Total: total, Rate: 40 << 20, ETA: 13 * time.Second})
	r.Progress(imaging.Progress{Stage: imaging.StageWrite, Done: total, Total: total, Rate: 40 << 20})
	r.Progress(imaging.Progress{Stage: imaging.StageWrite, Done: total, Total: total, Rate: 41 << 20})
	r.Progress(imaging.Progress{Stage: imaging.StageVerify, Done: total, Total: total})
	r.Progress(imaging.Progress{Stage: imaging.StageDone, Done: total, Total: total})
	r.Finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"write    [..............................]   0%  0 B / 1.0 GiB",
		"write    [##############################] 100%  1.0 GiB / 1.0 GiB  40 MiB/s",
		"verify   [##############################] 100%  1.0 GiB / 1.0 GiB",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got lines:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
	if got := formatProgress(imaging.Progress{Stage: imaging.StageWrite, Done: total / 2, Total: total, Rate: 40 << 20, ETA: 13 * time.Second}, 10); got != "write    [#####.....]  50%  512 MiB / 1.0 GiB  40 MiB/s  ETA 13s" {
		t.Fatalf("formatProgress = %q", got)
	}
}

// While Image Factory builds an image, progress says so instead of "0 B".
func TestProgressSaysFactoryIsBuilding(t *testing.T) {
	if got := formatProgress(imaging.Progress{Stage: imaging.StageBuild}, 30); !strings.Contains(got, "building this image") {
		t.Fatalf("%q", got)
	}
}

// Two images' downloads at once share one line, each named (a cluster in
// one run), instead of one bar both jump in.
func TestTermReporterTwoDownloads(t *testing.T) {
	var out bytes.Buffer
	r := newTermReporter(&out, true)
	r.Progress(imaging.Progress{Stage: imaging.StageDownload, Done: 10 << 20, Total: 40 << 20, Image: "profile controlplane"})
	r.lastOut = time.Time{} // the next report is drawn, not throttled
	r.Progress(imaging.Progress{Stage: imaging.StageDownload, Done: 20 << 20, Total: 40 << 20, Image: "profile worker"})
	r.Finish()
	draws := strings.Split(out.String(), "\r\033[K")
	if last := strings.TrimSpace(draws[len(draws)-1]); last != "profile controlplane download  25%  profile worker download  50%" {
		t.Fatalf("last line %q of %q", last, out.String())
	}
}

// A re-flash of a card that already held the image says so: "already held
// the image, verified", not the "wrote" of a fresh card (issue 39).
func TestCardLineSaysAlreadyHeld(t *testing.T) {
	fresh := imaging.CardResult{Target: "/dev/sdb", Bytes: 16 << 20, SHA256: "abc", Written: 16 << 20, Verified: true, VerifyMode: "O_DIRECT"}
	if got := cardLine(fresh); got != "wrote 16 MiB to /dev/sdb (16 MiB written, 0 B already on the card), sha256 abc, verified by read-back (O_DIRECT)" {
		t.Errorf("fresh: %q", got)
	}
	held := imaging.CardResult{Target: "/dev/sdb", Bytes: 16 << 20, SHA256: "abc", Skipped: 16 << 20}
	if got := cardLine(held); got != "/dev/sdb already held the image, verified (16 MiB read, nothing written), sha256 abc" {
		t.Errorf("held: %q", got)
	}
	part := imaging.CardResult{Target: "/dev/sdb", Bytes: 16 << 20, SHA256: "abc", Written: 1 << 20, Skipped: 15 << 20, Verified: true, VerifyMode: "O_DIRECT"}
	if got := cardLine(part); !strings.HasPrefix(got, "wrote 16 MiB to /dev/sdb (1.0 MiB written, 15 MiB already on the card)") {
		t.Errorf("partly held: %q", got)
	}
}
