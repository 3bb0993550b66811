//go:build linux

package main

// A flash through the elevated child (a real child process, this test
// binary run as talosflash) onto a loop device, whole: plan.Flash with the
// write step forced into the child. Root only (loop devices); by hand:
//
//	go test -run '^$' -bench ElevatedChild -benchtime 3x .
//
// TALOSFLASH_BENCH_MIB sets the image's raw size (default 384), and
// TALOSFLASH_BENCH_IMAGE a factory-shaped .raw.xz or .raw.zst to use instead.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

func BenchmarkElevatedChildFlash(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loop devices need root")
	}
	size := int64(384 << 20)
	if v, err := strconv.Atoi(os.Getenv("TALOSFLASH_BENCH_MIB")); err == nil && v > 0 {
		size = int64(v) << 20
	}
	img := os.Getenv("TALOSFLASH_BENCH_IMAGE")
	if img == "" {
		if !imagetest.ShapeXZ0.HaveTool() {
			b.Skip("xz not installed")
		}
		img = filepath.Join(b.TempDir(), "metal-arm64.raw.xz")
		if err := imagetest.WriteFactoryFile(context.Background(), img, imagetest.ShapeXZ0, size, 1); err != nil {
			b.Fatal(err)
		}
	}
	want, n := rawSHA256(b, img)
	loop := imagetest.LoopDevice(b, n+(1<<20), false)
	// Every iteration writes a card that holds none of the image (none of
	// its chunks is skipped): a pattern the image never has.
	fill := make([]byte, 4<<20)
	for i := range fill {
		fill[i] = byte(i*7 + 1)
	}
	b.SetBytes(n)
	var cpu time.Duration // user+sys of this process and its (waited) children, timed part only
	for b.Loop() {
		b.StopTimer()
		dev, err := os.OpenFile(loop, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < n; off += int64(len(fill)) {
			if _, err := dev.WriteAt(fill, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := dev.Sync(); err != nil {
			b.Fatal(err)
		}
		dev.Close()
		b.StartTimer()
		before := cpuTime()
		out, err := plan.Flash(context.Background(), plan.Job{
			Image: plan.FromFile(img), Devices: []string{loop}, Safety: devices.Options{AllowLoop: true},
			NeedsElevation: func(string) bool { return true },
			Elevate: func(args []string) (*exec.Cmd, error) {
				cmd := exec.Command(os.Args[0], args...)
				cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
				return cmd, nil
			},
		})
		cpu += cpuTime() - before
		if err != nil || !out.Elevated || out.Cards[0].SHA256 != want || !out.Cards[0].Verified {
			b.Fatalf("%+v %v", out, err)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// cpuTime is the user+sys time of this process and of its children that
// have been waited for (the elevated child, once plan.Flash returned).
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// rawSHA256 is the decoded image's SHA-256 and size (imaging's own
// decoder, in process).
func rawSHA256(b *testing.B, img string) (string, int64) {
	h := sha256.New()
	dir := b.TempDir()
	target := filepath.Join(dir, "raw")
	cards, err := imaging.FlashAll(context.Background(), imaging.FlashOptions{Source: imaging.Source{Path: img}, Targets: []string{target}})
	if err != nil || cards[0].Err != nil {
		b.Fatal(err, cards)
	}
	f, err := os.Open(target)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n, err := io.Copy(h, f)
	if err != nil {
		b.Fatal(err)
	}
	os.Remove(target)
	if got := hex.EncodeToString(h.Sum(nil)); got != cards[0].SHA256 {
		b.Fatalf("raw %s, flash said %s", got, cards[0].SHA256)
	}
	return cards[0].SHA256, n
}
