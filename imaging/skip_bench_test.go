package imaging

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkCardSkip flashes the factory-shaped image onto an emulated card
// (25 MB/s write, 45 MB/s read; one clock) that holds, before each run,
// zeros, the image itself or random data, twice in turn: writing every
// byte (as before) and writing only what the card lacks. It reports per
// content the median of the paired time ratios (skip/all) with their
// range, and the MiB written and skipped. Goals: zeroed <= 0.60, holding
// the image <= 0.40, random <= 1.02.
func BenchmarkCardSkip(b *testing.B) {
	path, size := cardImage(b)
	dir := b.TempDir()
	raw := filepath.Join(dir, "image.raw")
	random := filepath.Join(dir, "random.raw")
	writeTemplate(b, raw, size, func(w io.Writer) error {
		src, err := openSource(context.Background(), Source{Path: path}, nil)
		if err != nil {
			return err
		}
		defer src.closer.Close()
		stream, closeStream, err := decode(src, false)
		if err != nil {
			return err
		}
		defer closeStream()
		_, err = io.Copy(w, stream)
		return err
	})
	writeTemplate(b, random, size, func(w io.Writer) error {
		r := rand.New(rand.NewPCG(7, 7))
		buf := make([]byte, 1<<20)
		for n := int64(0); n < size; n += int64(len(buf)) {
			for i := 0; i+8 <= len(buf); i += 8 {
				v := r.Uint64()
				for j := range 8 {
					buf[i+j] = byte(v >> (8 * j))
				}
			}
			if _, err := w.Write(buf[:min(int64(len(buf)), size-n)]); err != nil {
				return err
			}
		}
		return nil
	})
	contents := []struct{ name, from string }{{"zeroed", ""}, {"image", raw}, {"random", random}}
	ratios := map[string][]float64{}
	written, skipped := map[string]int64{}, map[string]int64{}
	card := filepath.Join(dir, "card.img")
	w, r := cardMBps()*1e6, cardReadMBps()*1e6
	run := func(from string, skip bool) (time.Duration, *CardResult) {
		prepareCard(b, card, from, size)
		skipHeld = skip
		defer func() { skipHeld = true }()
		start := time.Now()
		res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: path}, Targets: []string{card}, Verify: true,
			Open: func(p string, _ int64) (Target, error) {
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				return &cardTarget{File: f, bps: w, rbps: r}, err
			}})
		d := time.Since(start)
		if err != nil || !res.Verified || res.Bytes != size {
			b.Fatalf("%+v %v", res, err)
		}
		return d, res
	}
	i := 0
	for b.Loop() {
		for _, c := range contents {
			var all, some time.Duration
			var res *CardResult
			if i%2 == 0 { // in turn: neither always runs first
				all, _ = run(c.from, false)
				some, res = run(c.from, true)
			} else {
				some, res = run(c.from, true)
				all, _ = run(c.from, false)
			}
			ratios[c.name] = append(ratios[c.name], some.Seconds()/all.Seconds())
			written[c.name], skipped[c.name] = res.Written, res.Skipped
		}
		i++
	}
	for _, c := range contents {
		rs := slices.Sorted(slices.Values(ratios[c.name]))
		b.ReportMetric(rs[len(rs)/2], c.name+"-x")
		b.ReportMetric(rs[0], c.name+"-x-min")
		b.ReportMetric(rs[len(rs)-1], c.name+"-x-max")
		b.ReportMetric(float64(written[c.name])/(1<<20), c.name+"-written-MiB")
		b.ReportMetric(float64(skipped[c.name])/(1<<20), c.name+"-skipped-MiB")
	}
}

// writeTemplate writes size bytes from fill into path once.
func writeTemplate(b *testing.B, path string, size int64, fill func(io.Writer) error) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := fill(bw); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if st, _ := f.Stat(); st.Size() != size {
		b.Fatalf("%s: %d bytes, want %d", path, st.Size(), size)
	}
	f.Close()
}

// prepareCard makes card hold from's bytes (zeros when from is "").
func prepareCard(b *testing.B, card, from string, size int64) {
	b.Helper()
	os.Remove(card)
	f, err := os.Create(card)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if from == "" {
		if err := f.Truncate(size); err != nil {
			b.Fatal(err)
		}
		return
	}
	src, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	if _, err := io.Copy(f, src); err != nil {
		b.Fatal(fmt.Errorf("prepare card: %w", err))
	}
}
