package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

func TestMain(m *testing.M) {
	// The elevated child of these tests writes image files, not devices
	// (withoutFileTargets turns the seam off again).
	ElevatedFileTargets = true
	// Lets a test run this binary as the CLI (in a terminal: see tmux below).
	if os.Getenv("TALOSFLASH_CLI_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}

var barCases = []imaging.Progress{
	{Stage: imaging.StageDownload, Total: 1 << 30},
	{Stage: imaging.StageDownload, Done: 123456789, Total: 1 << 30, Rate: 52 << 20, ETA: 17 * time.Second},
	{Stage: imaging.StageWrite, Done: 1 << 30, Total: 1 << 30, Rate: 41 << 20},
	{Stage: imaging.StageVerify, Done: 999 << 30, Total: 1000 << 30, Rate: 1000 << 20, ETA: 90 * time.Minute},
	{Stage: imaging.StageWrite, Done: 700 << 20, Rate: 30 << 20, Compressed: true}, // size unknown
}

func TestFitProgressNeverWraps(t *testing.T) {
	for cols := 1; cols <= 250; cols++ {
		for _, p := range barCases {
			line := fitProgress(p, cols)
			if len(line) > max(cols-1, 0) || strings.ContainsAny(line, "\r\n") {
				t.Fatalf("cols %d: %q (%d bytes) does not fit", cols, line, len(line))
			}
		}
	}
}

func TestFitProgressDegrades(t *testing.T) {
	p := barCases[1]
	cases := []struct {
		cols       int
		want, not  []string
		barAtLeast int
	}{
		{200, []string{"download [", "] ", " 11%", "118 MiB / 1.0 GiB", "52 MiB/s", "ETA 17s"}, nil, maxBarWidth},
		{80, []string{"[#", " 11%", "118 MiB / 1.0 GiB", "52 MiB/s", "ETA 17s"}, nil, minBarWidth},
		// 60 columns: no room for a useful bar; everything else stays.
		{60, []string{" 11%", "118 MiB / 1.0 GiB", "52 MiB/s", "ETA 17s"}, []string{"["}, 0},
		{40, []string{" 11%", "52 MiB/s", "ETA 17s"}, []string{"[", "GiB"}, 0},
		{25, []string{" 11%", "ETA 17s"}, []string{"[", "MiB/s"}, 0},
		{16, []string{"download  11%"}, []string{"ETA"}, 0},
	}
	for _, c := range cases {
		line := fitProgress(p, c.cols)
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("cols %d: %q lacks %q", c.cols, line, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(line, w) {
				t.Errorf("cols %d: %q has %q", c.cols, line, w)
			}
		}
		if bar := strings.Count(line, "#") + strings.Count(line, "."); c.barAtLeast > 0 && bar-1 < c.barAtLeast {
			// "- 1": the dot in "1.0 GiB"
			t.Errorf("cols %d: bar of %d in %q, want at least %d", c.cols, bar-1, line, c.barAtLeast)
		}
	}
	if got := fitProgress(barCases[4], 60); got != "write     700 MiB    30 MiB/s" {
		t.Errorf("unknown size: %q", got)
	}
}

// On a terminal every update redraws one line in place; elsewhere (a log
// file, a pipe) it prints whole lines, never a carriage return.
func TestTermReporterRedrawsInPlace(t *testing.T) {
	var tty, log bytes.Buffer
	for _, r := range []*termReporter{newTermReporter(&tty, true), newTermReporter(&log, false)} {
		for _, p := range barCases[:4] {
			r.Progress(p)
		}
		r.Finish()
	}
	// A buffer is no terminal: the width falls back to 80.
	for _, draw := range strings.Split(strings.ReplaceAll(tty.String(), "\n", ""), "\r\033[K")[1:] {
		if len(draw) >= defaultTermWidth {
			t.Errorf("redraw %q is %d columns, want < %d", draw, len(draw), defaultTermWidth)
		}
	}
	if strings.Count(tty.String(), "\n") != 3 { // one line left per stage
		t.Errorf("tty output %q: want one finished line per stage", tty.String())
	}
	if strings.Contains(log.String(), "\r") || strings.Count(log.String(), "\n") < 3 {
		t.Errorf("non-terminal output %q: want lines, no carriage returns", log.String())
	}
}

// For real: a flash in a 60-column tmux pane leaves one line per stage; a
// line wider than the pane used to wrap and leave a row on every redraw.
func TestProgressIn60ColumnTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tmux")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	_, fx := fakeFactory(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	// A server of our own on a fresh socket: reusing a name races with the
	// previous server's exit ("server exited unexpectedly").
	socket := filepath.Join(dir, "tmux.sock")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(tmux, append([]string{"-S", socket, "-f", "/dev/null"}, args...)...)
		cmd.Env = append(os.Environ(), "TALOSFLASH_CLI_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	shell := shellQuote(os.Args[0]) + " --flash --image " + shellQuote(img) + " --device " +
		shellQuote(filepath.Join(dir, "card.img")) + " --yes --create-file --cache-dir " + shellQuote(dir) + "; echo __END__ $?; sleep 600"
	if out, err := run("new-session", "-d", "-x", "60", "-y", "30", "-s", "flash", shell); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = run("kill-server") })

	var screen string
	for deadline := time.Now().Add(2 * time.Minute); ; {
		// -J joins wrapped rows: a line that wrapped comes back longer than the pane.
		screen, err = run("capture-pane", "-p", "-J", "-t", "flash")
		if err != nil {
			t.Fatalf("capture-pane: %v: %s", err, screen)
		}
		if strings.Contains(screen, "__END__") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no end after 2 minutes:\n%s", screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(screen, "__END__ 0") {
		t.Fatalf("flash failed:\n%s", screen)
	}
	stages := map[string]int{}
	for _, line := range strings.Split(screen, "\n") {
		line = strings.TrimRight(line, " ")
		stage, _, _ := strings.Cut(line, " ")
		if stage == "write" || stage == "verify" {
			stages[stage]++
			if len(line) >= 60 || !strings.Contains(line, "100%") {
				t.Errorf("progress line %q: want a finished line under 60 columns", line)
			}
		}
	}
	if stages["write"] != 1 || stages["verify"] != 1 {
		t.Errorf("want exactly one write and one verify line, got %v; screen:\n%s", stages, screen)
	}
}

// The layout does not jump while one stage runs: the bar keeps its width
// and the percentage its column as the rate and the time left change.
func TestFitProgressIsStable(t *testing.T) {
	const total = 1300 << 20
	for _, cols := range []int{60, 80, 120} {
		pctCol, barEnd := -1, -1
		for i := 0; i <= 20; i++ {
			p := imaging.Progress{Stage: imaging.StageWrite, Done: total * int64(i) / 20, Total: total}
			if i > 0 && i < 20 {
				p.Rate = float64(int64(1) << (10 + i)) // 2 KiB/s .. 512 MiB/s
				p.ETA = time.Duration(i*i*7) * time.Second
			}
			line := fitProgress(p, cols)
			if pctCol < 0 {
				pctCol, barEnd = strings.Index(line, "%"), strings.Index(line, "]")
			}
			if strings.Index(line, "%") != pctCol || strings.Index(line, "]") != barEnd {
				t.Errorf("cols %d: %q moved the percentage or the bar (want %% at %d, ] at %d)", cols, line, pctCol, barEnd)
			}
		}
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
