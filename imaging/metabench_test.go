package imaging

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
)

// metaBenchImage is the image BenchmarkCardMETAPrecheck flashes:
// TALOSFLASH_BENCH_META_IMAGE, a factory-shaped Talos image (its size and
// layout, META at 1101 MiB after BOOT: imagetest.WriteTalosFactoryFile),
// generated there when missing (.zst: zstd -18, .xz: xz -0 -T0, .gz:
// gzip -6); else a
// 64 MiB zstd one of TalosRaw's layout.
func metaBenchImage(b *testing.B) (string, int64) {
	p := os.Getenv("TALOSFLASH_BENCH_META_IMAGE")
	if p == "" {
		raw, err := imagetest.TalosRaw(64<<20, 1)
		if err != nil {
			b.Fatal(err)
		}
		z, err := imagetest.ZstdBytes(raw)
		if err != nil {
			b.Fatal(err)
		}
		p = filepath.Join(b.TempDir(), "talos.raw.zst")
		if err := os.WriteFile(p, z, 0o644); err != nil {
			b.Fatal(err)
		}
		return p, int64(len(raw))
	}
	if _, err := os.Stat(p); err != nil {
		shape := imagetest.ShapeZst18
		switch {
		case strings.HasSuffix(p, ".xz"):
			shape = imagetest.ShapeXZ0
		case strings.HasSuffix(p, ".gz"):
			shape = imagetest.Shape{Name: "gz", Ext: ".gz", Cmd: []string{"gzip", "-6", "-c"}}
		}
		if err := imagetest.WriteTalosFactoryFile(context.Background(), p, shape, imagetest.FactorySize, 1); err != nil {
			b.Fatal(err)
		}
	}
	return cardImageFrom(b, p)
}

// metaCheck is what app/plan's check does for a node's card: the image's
// META store (through image when it is a file, nil: the head only, as for
// a stream) checked for the node's values. took adds the time it ran.
func metaCheck(took *time.Duration) func([]byte, int64, io.ReaderAt) error {
	tags := []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte("addresses: []")}}
	return func(head []byte, size int64, image io.ReaderAt) error {
		start := time.Now()
		defer func() { *took += time.Since(start) }()
		s, err := meta.ImageStore(head, size, image)
		if err != nil || s.ADV == nil {
			return err
		}
		return meta.CheckStore(s, tags)
	}
}

// BenchmarkCardMETAPrecheck is the cost of checking an image file's META
// store before any card is touched (zstd and gzip decode up to META's end,
// xz its blocks, raw reads it): a flash + verify onto an emulated card
// (25 MB/s write, 45 MB/s read by default) whose check reads the store,
// against the same flash whose check sees the head only (what a stream
// gets), in turn per iteration. precheck-s is the check's own time (the
// delay before the card is opened), with/without the ratio of the paired
// flashes.
func BenchmarkCardMETAPrecheck(b *testing.B) {
	path, size := metaBenchImage(b)
	w, r := cardMBps(), cardReadMBps()
	dir := b.TempDir()
	flash := func(image bool) (time.Duration, time.Duration) {
		var took time.Duration
		check := metaCheck(&took)
		if !image {
			check = func(head []byte, size int64, _ io.ReaderAt) error { return metaCheck(&took)(head, size, nil) }
		}
		dst := filepath.Join(dir, "card.img")
		start := time.Now()
		cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: path}, Targets: []string{dst}, Verify: true, CheckHead: check,
			Open: func(p string, _ int64) (Target, error) { return openCardAt(p, w, r) }})
		d := time.Since(start)
		if err != nil || cards[0].Err != nil || cards[0].Bytes != size {
			b.Fatalf("%+v %v", cards, err)
		}
		return d, took
	}
	var with, without, check, checkCPU time.Duration
	var ratios []float64
	for b.Loop() {
		a, _ := flash(false)
		cpu := processCPU()
		c, took := flash(true)
		checkCPU += processCPU() - cpu
		with, without, check = with+c, without+a, check+took
		ratios = append(ratios, c.Seconds()/a.Seconds())
	}
	n := float64(b.N)
	slices.Sort(ratios)
	b.ReportMetric(check.Seconds()/n, "precheck-s")
	b.ReportMetric(with.Seconds()/n, "with-s")
	b.ReportMetric(without.Seconds()/n, "without-s")
	b.ReportMetric(ratios[len(ratios)/2], "with/without-median")
	b.ReportMetric(checkCPU.Seconds()/n, "with-cpu-s")
}

// BenchmarkMETAPrecheckAlone is the check alone on the same image: the
// delay before a card is opened, without the card's time.
func BenchmarkMETAPrecheckAlone(b *testing.B) {
	path, _ := metaBenchImage(b)
	var took time.Duration
	check := metaCheck(&took)
	refused := func(head []byte, size int64, image io.ReaderAt) error {
		if err := check(head, size, image); err != nil {
			return err
		}
		return errStopHere
	}
	cpu := processCPU()
	for b.Loop() {
		if _, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: path}, Targets: []string{filepath.Join(b.TempDir(), "card.img")}, CheckHead: refused}); err != errStopHere {
			b.Fatal(err)
		}
	}
	b.ReportMetric(took.Seconds()/float64(b.N), "precheck-s")
	b.ReportMetric((processCPU()-cpu).Seconds()/float64(b.N), "cpu-s")
}

// errStopHere ends a flash after its check, no card opened.
var errStopHere = io.ErrNoProgress
