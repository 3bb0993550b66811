package imaging

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// throttledFile serves a file at bps bytes per second (a 100 Mbit/s line
// by default: TALOSFLASH_BENCH_NET_MBPS).
func throttledFile(b *testing.B, path string, bps float64) *httptest.Server {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		start := time.Now()
		for off := 0; off < len(data); off += 256 << 10 {
			if _, err := w.Write(data[off:min(len(data), off+256<<10)]); err != nil {
				return
			}
			time.Sleep(time.Until(start.Add(time.Duration(float64(off+256<<10) / bps * float64(time.Second)))))
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkFirstFlashStreamed is the first flash of an image (empty
// cache) over a 12.5 MB/s download onto the emulated 25/45 MB/s card
// (zeroed, the image's size),
// against the card alone (the same image already cached), in turn; it
// reports the median of the paired ratios (goal <= 1.05) with their range,
// and the ratio the download-then-write order had (download time + card).
func BenchmarkFirstFlashStreamed(b *testing.B) {
	path, size := cardImage(b)
	netBps := envMBps("TALOSFLASH_BENCH_NET_MBPS", 12.5) * 1e6
	srv := throttledFile(b, path, netBps)
	st, _ := os.Stat(path)
	w, r := cardMBps()*1e6, cardReadMBps()*1e6
	dir := b.TempDir()
	card := filepath.Join(dir, "card.img")
	key := CacheKey(testSchematic, testVersion, filepath.Base(path))
	open := func(p string, _ int64) (Target, error) {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		return &cardTarget{File: f, bps: w, rbps: r}, err
	}
	flash := func(c *Cache) time.Duration {
		prepareCard(b, card, "", size) // a zeroed card of the image's size, as a device has one
		start := time.Now()
		res, err := flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/" + filepath.Base(path), Key: key, Cache: c, HTTPClient: srv.Client()},
			Targets: []string{card}, Verify: true, Open: open})
		if err != nil || !res.Verified || res.Bytes != size {
			b.Fatalf("%+v %v", res, err)
		}
		return time.Since(start)
	}
	var ratios []float64
	i := 0
	for b.Loop() {
		first := &Cache{Dir: filepath.Join(dir, "cache-"+strconv.Itoa(i))}
		var streamed, alone time.Duration
		if i%2 == 0 {
			streamed = flash(first)
			alone = flash(first) // now cached: the card alone
		} else {
			warm := &Cache{Dir: filepath.Join(dir, "warm")}
			if i == 1 {
				flash(warm)
			}
			alone = flash(warm)
			streamed = flash(first)
		}
		os.RemoveAll(first.Dir)
		ratios = append(ratios, streamed.Seconds()/alone.Seconds())
		i++
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "streamed/card")
	b.ReportMetric(ratios[0], "streamed/card-min")
	b.ReportMetric(ratios[len(ratios)-1], "streamed/card-max")
	b.ReportMetric(float64(st.Size())/netBps, "download-s")
}
