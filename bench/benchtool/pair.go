package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

// run is one timed run of a shell command: wall time and the peak RSS of
// its largest process (wait4's rusage covers the shell's reaped children,
// e.g. both sides of a pipe).
type run struct {
	wall  time.Duration
	rssKB int64
	err   error
}

func timeShell(cmd string) run {
	// Flush the previous run's dirty pages first, outside the timing, so a
	// run does not pay for the one before.
	_ = exec.Command("sync").Run()
	c := exec.Command("sh", "-c", cmd)
	c.Stderr = os.Stderr
	start := time.Now()
	err := c.Run()
	r := run{wall: time.Since(start), err: err}
	if c.ProcessState != nil {
		r.rssKB = peakRSSKB(c.ProcessState)
	}
	return r
}

func median[T int64 | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pair times two commands interleaved (A B A B ...) after one warm-up of
// each and prints one markdown table row: medians, ranges, peak RSS and the
// median of the per-pair ratios A/B, which holds when the machine's speed
// drifts between pairs.
func pair(args []string) error {
	fs := flag.NewFlagSet("pair", flag.ExitOnError)
	n := fs.Int("n", 3, "counted runs of each command")
	name := fs.String("name", "", "row label")
	a := fs.String("a", "", "our command (shell)")
	b := fs.String("b", "", "reference command (shell)")
	la := fs.String("la", "", "label of A (default: the command)")
	lb := fs.String("lb", "", "label of B (default: the command)")
	fs.Parse(args)
	if *a == "" || *b == "" || *n < 1 {
		return errors.New("pair: need -a and -b commands and -n >= 1")
	}
	for _, c := range []string{*a, *b} { // warm-up: page cache, first-run costs
		if r := timeShell(c); r.err != nil {
			return fmt.Errorf("pair: %q: %w", c, r.err)
		}
	}
	var wa, wb []time.Duration
	var ra, rb []int64
	var ratios []float64
	for range *n {
		x, y := timeShell(*a), timeShell(*b)
		if x.err != nil || y.err != nil {
			return fmt.Errorf("pair: a run failed: %v / %v", x.err, y.err)
		}
		wa, wb = append(wa, x.wall), append(wb, y.wall)
		ra, rb = append(ra, x.rssKB), append(rb, y.rssKB)
		ratios = append(ratios, x.wall.Seconds()/y.wall.Seconds())
	}
	if *la == "" {
		*la = *a
	}
	if *lb == "" {
		*lb = *b
	}
	secs := func(w []time.Duration) string {
		return fmt.Sprintf("%.2f s (%.2f-%.2f)", median(w).Seconds(), slices.Min(w).Seconds(), slices.Max(w).Seconds())
	}
	fmt.Printf("| %s | `%s` | %s | %d MiB | `%s` | %s | %d MiB | **%.2f** (%.2f-%.2f) |\n",
		*name, *la, secs(wa), slices.Max(ra)/1024, *lb, secs(wb), slices.Max(rb)/1024,
		median(ratios), slices.Min(ratios), slices.Max(ratios))
	return nil
}
