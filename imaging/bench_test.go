package imaging

// Benchmarks of each stage alone and of the whole pipeline on one generated
// image (default 256 MiB raw; TALOSFLASH_BENCH_MIB=1024 for Talos-like size):
//
//	go test -run '^$' -bench . -benchtime 3x ./imaging/

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

var (
	benchOnce sync.Once
	benchDir  string
	benchXZ   string
	benchSize int64
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

func benchImage(b *testing.B) (xzPath string, size int64) {
	b.Helper()
	benchOnce.Do(func() {
		benchSize = 256 << 20
		if v, err := strconv.Atoi(os.Getenv("TALOSFLASH_BENCH_MIB")); err == nil && v > 0 {
			benchSize = int64(v) << 20
		}
		if benchDir, benchErr = os.MkdirTemp("", "talosflash-bench-"); benchErr != nil {
			return
		}
		benchXZ = filepath.Join(benchDir, "metal-arm64.raw.xz")
		// Shaped like the factory's images: xz -0 -T0, 1 MiB blocks, 256 KiB
		// dictionary (without the xz tool: ulikunitz's writer, 1 MiB blocks).
		if imagetest.ShapeXZ0.HaveTool() {
			benchErr = imagetest.WriteFactoryFile(context.Background(), benchXZ, imagetest.ShapeXZ0, benchSize, 1)
		} else {
			benchErr = imagetest.WriteXZFile(context.Background(), benchXZ, benchSize, 1, 1<<20, false)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchXZ, benchSize
}

func BenchmarkStageDecodeXZ(b *testing.B) {
	path, size := benchImage(b)
	buf := make([]byte, chunkSize)
	b.SetBytes(size)
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		dec, err := newDecompressor(bufio.NewReaderSize(f, 1<<20)) // as the pipeline feeds it
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{dec}, buf)
		f.Close()
		if err != nil || n != size {
			b.Fatalf("%d, %v", n, err)
		}
	}
}

func benchChunk(b *testing.B) []byte {
	raw, err := imagetest.Raw(imagetest.MinSize*4, 1)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

func BenchmarkStageSHA256(b *testing.B) {
	buf := benchChunk(b)
	b.SetBytes(int64(len(buf)))
	h := sha256.New()
	for b.Loop() {
		h.Write(buf)
	}
}

func BenchmarkStageCRC32C(b *testing.B) {
	buf := benchChunk(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for i := 0; i < len(buf); i += crcBlock {
			crc32.Checksum(buf[i:i+crcBlock], crcTable)
		}
	}
}

// BenchmarkStageWriteFile writes the image size in 4 MiB O_DIRECT writes
// to a file and fsyncs, like the write stage.
func BenchmarkStageWriteFile(b *testing.B) {
	_, size := benchImage(b)
	buf := alignedBuf(chunkSize)
	copy(buf, benchChunk(b))
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		t, err := OpenFile(dst, size)
		if err != nil {
			b.Fatal(err)
		}
		f := t.(*os.File)
		_ = setDirect(f.Fd(), true)
		for off := int64(0); off < size; off += chunkSize {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func benchFlash(b *testing.B, verify bool) {
	path, size := benchImage(b)
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: path}, Targets: []string{dst}, Verify: verify})
		if err != nil || res.Bytes != size {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

func BenchmarkPipelineWrite(b *testing.B)       { benchFlash(b, false) }
func BenchmarkPipelineWriteVerify(b *testing.B) { benchFlash(b, true) }

// cardMBps is the emulated SD card's sequential write speed (a common
// UHS-I card writes ~25 MB/s); TALOSFLASH_BENCH_CARD_MBPS changes it.
func cardMBps() float64 { return envMBps("TALOSFLASH_BENCH_CARD_MBPS", 25) }

// cardReadMBps is its read speed, for the read-back;
// TALOSFLASH_BENCH_CARD_READ_MBPS changes it.
func cardReadMBps() float64 { return envMBps("TALOSFLASH_BENCH_CARD_READ_MBPS", 45) }

func envMBps(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

// cardTarget is a file that is written and read no faster than a card:
// one clock for the card, which does one thing at a time: each call takes
// the card's time for its bytes from when it was asked, or from when the
// card finished what it was given before (time it sat idle is not banked).
// Positional writes (the first MiB last, skipped chunks) are held like the
// others. The file's own I/O (O_DIRECT to this machine's disk) runs inside
// that time, not before it, and the emulation's own lateness in returning a
// call (a sleep overshoots by ~0.3-0.8 ms here) is not counted as the
// caller's idle time: both once added a few ms to each call, 1.7 s over the
// 499 calls of a 384 MiB re-flash (1 MiB compare reads), a cost no card has.
type cardTarget struct {
	*os.File
	mu        sync.Mutex
	busyUntil time.Time
	late      time.Duration // how late the last call was returned
	bps, rbps float64
}

// hold returns when the card would have finished n bytes asked at asked.
func (c *cardTarget) hold(asked time.Time, n int, bps float64) {
	if bps <= 0 {
		return
	}
	c.mu.Lock()
	start := asked.Add(-c.late)
	if c.busyUntil.After(start) {
		start = c.busyUntil
	}
	until := start.Add(time.Duration(float64(n) / bps * float64(time.Second)))
	c.busyUntil = until
	c.mu.Unlock()
	time.Sleep(time.Until(until))
	c.mu.Lock()
	c.late = max(0, time.Since(until))
	c.mu.Unlock()
}

func (c *cardTarget) Write(p []byte) (int, error) {
	asked := time.Now()
	n, err := c.File.Write(p)
	c.hold(asked, n, c.bps)
	return n, err
}

func (c *cardTarget) WriteAt(p []byte, off int64) (int, error) {
	asked := time.Now()
	n, err := c.File.WriteAt(p, off)
	c.hold(asked, n, c.bps)
	return n, err
}

func (c *cardTarget) ReadAt(p []byte, off int64) (int, error) {
	asked := time.Now()
	n, err := c.File.ReadAt(p, off)
	c.hold(asked, n, c.rbps)
	return n, err
}

func openCard(path string) (*cardTarget, error) {
	return openCardAt(path, cardMBps(), 0)
}

func openCardAt(path string, wMBps, rMBps float64) (*cardTarget, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &cardTarget{File: f, bps: wMBps * 1e6, rbps: rMBps * 1e6}, nil
}

// cardImage is the image the card benchmarks flash: TALOSFLASH_BENCH_IMAGE
// (e.g. make bench's factory-shaped .xz or .zst, 1246 MiB) or the
// generated one.
func cardImage(b *testing.B) (string, int64) {
	return cardImageFrom(b, os.Getenv("TALOSFLASH_BENCH_IMAGE"))
}

// cardImageFrom is the image at p and its decoded size (p "": the
// generated one).
func cardImageFrom(b *testing.B, p string) (string, int64) {
	if p == "" {
		return benchImage(b)
	}
	src, err := openSource(context.Background(), Source{Path: p}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer src.closer.Close()
	if src.size > 0 {
		return p, src.size
	}
	// No size in the headers (a zstd frame written from a pipe): count.
	dec, err := decoderFor(src.format, src, src.zstdWindow)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, dec)
	if c, ok := dec.(io.Closer); ok {
		c.Close()
	}
	if err != nil || n <= 0 {
		b.Fatalf("%s: %d bytes, %v", p, n, err)
	}
	return p, n
}

// flashCards flashes and verifies path onto emulated cards of the given
// write/read speeds (MB/s) from one decode; it fails the benchmark unless
// every card verifies.
func flashCards(b *testing.B, path string, size int64, speeds [][2]float64) time.Duration {
	dir := b.TempDir()
	var names []string
	speed := map[string][2]float64{}
	for i, s := range speeds {
		n := filepath.Join(dir, fmt.Sprintf("card%d.img", i))
		names, speed[n] = append(names, n), s
	}
	start := time.Now()
	cards, err := FlashAll(context.Background(), FlashOptions{
		Source: Source{Path: path}, Targets: names, Verify: true,
		Open: func(p string, _ int64) (Target, error) { return openCardAt(p, speed[p][0], speed[p][1]) },
	})
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range cards {
		if c.Err != nil || c.Bytes != size || !c.Verified {
			b.Fatalf("%s: %+v, %v", c.Target, c, c.Err)
		}
	}
	return d
}

// BenchmarkCardFlashVerify is a whole flash + read-back onto one emulated
// card (25 MB/s write, 45 MB/s read by default) against its floor, the
// card's own time: bytes/write speed + bytes/read speed. x-floor is the
// ratio (1.00: the card is the only cost).
func BenchmarkCardFlashVerify(b *testing.B) {
	path, size := cardImage(b)
	w, r := cardMBps(), cardReadMBps()
	floor := float64(size)/(w*1e6) + float64(size)/(r*1e6)
	var total time.Duration
	for b.Loop() {
		total += flashCards(b, path, size, [][2]float64{{w, r}})
	}
	b.ReportMetric(floor, "floor-s")
	b.ReportMetric(total.Seconds()/float64(b.N)/floor, "x-floor")
}

// BenchmarkCardsThreeVsAlone flashes the slowest card alone, then three
// cards (the slowest, 1.2x and 1.4x its speeds) from one decode, in turn
// per iteration; three/alone is the ratio of the paired times (goal:
// <= 1.15).
func BenchmarkCardsThreeVsAlone(b *testing.B) {
	path, size := cardImage(b)
	w, r := cardMBps(), cardReadMBps()
	floor := float64(size)/(w*1e6) + float64(size)/(r*1e6)
	var alone, three time.Duration
	var ratios []float64
	for b.Loop() {
		a := flashCards(b, path, size, [][2]float64{{w, r}})
		t := flashCards(b, path, size, [][2]float64{{w, r}, {1.2 * w, 1.2 * r}, {1.4 * w, 1.4 * r}})
		alone, three = alone+a, three+t
		ratios = append(ratios, t.Seconds()/a.Seconds())
	}
	n := float64(b.N)
	b.ReportMetric(alone.Seconds()/n, "alone-s")
	b.ReportMetric(three.Seconds()/n, "three-s")
	b.ReportMetric(floor, "floor-s")
	b.ReportMetric(slices.Max(ratios), "three/alone-max")
	b.ReportMetric(three.Seconds()/alone.Seconds(), "three/alone")
}

// cardImage2 is the second image of the cluster benchmark (the workers'):
// TALOSFLASH_BENCH_IMAGE2, else the first image again (decoded a second
// time, as a second image of the same shape would be).
func cardImage2(b *testing.B) (string, int64) {
	if p := os.Getenv("TALOSFLASH_BENCH_IMAGE2"); p != "" {
		return cardImageFrom(b, p)
	}
	return cardImage(b)
}

// groupCard is one emulated card of a group: write and read MB/s.
type groupCard = [2]float64

// flashGroupsCards flashes and verifies each image onto its emulated
// cards, all images at once (FlashGroups); it fails the benchmark unless
// every card verifies.
func flashGroupsCards(b *testing.B, paths []string, sizes []int64, speeds [][]groupCard) time.Duration {
	dir := b.TempDir()
	speed := map[string]groupCard{}
	groups := make([]FlashOptions, len(paths))
	for g, path := range paths {
		groups[g] = FlashOptions{Source: Source{Path: path}, Verify: true,
			Open: func(p string, _ int64) (Target, error) { return openCardAt(p, speed[p][0], speed[p][1]) }}
		for i, s := range speeds[g] {
			n := filepath.Join(dir, fmt.Sprintf("image%d-card%d.img", g, i))
			groups[g].Targets, speed[n] = append(groups[g].Targets, n), s
		}
	}
	start := time.Now()
	res, err := FlashGroups(context.Background(), groups)
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	for g, cards := range res {
		for _, c := range cards {
			if c.Err != nil || c.Bytes != sizes[g] || !c.Verified {
				b.Fatalf("%s: %+v, %v", c.Target, c, c.Err)
			}
		}
	}
	return d
}

// BenchmarkCardsClusterVsAlone is a cluster's cards in one run against the
// slowest card alone, in turn per iteration: cp-1 from one image (its
// card 1.2x the slowest's speeds), worker-1 (the slowest card) and
// worker-2 (1.4x) from another, both images decoded at once
// (FlashGroups); cluster/alone is the ratio of the paired times (goal:
// <= 1.10). The workers' image is TALOSFLASH_BENCH_IMAGE2 (default: the
// first image decoded a second time).
func BenchmarkCardsClusterVsAlone(b *testing.B) {
	cpPath, cpSize := cardImage(b)
	wPath, wSize := cardImage2(b)
	w, r := cardMBps(), cardReadMBps()
	var alone, cluster, aloneCPU, clusterCPU time.Duration
	var ratios []float64
	for b.Loop() {
		cpu := processCPU()
		a := flashGroupsCards(b, []string{wPath}, []int64{wSize}, [][]groupCard{{{w, r}}})
		cpu2 := processCPU()
		c := flashGroupsCards(b, []string{cpPath, wPath}, []int64{cpSize, wSize},
			[][]groupCard{{{1.2 * w, 1.2 * r}}, {{w, r}, {1.4 * w, 1.4 * r}}})
		alone, cluster = alone+a, cluster+c
		aloneCPU, clusterCPU = aloneCPU+cpu2-cpu, clusterCPU+processCPU()-cpu2
		ratios = append(ratios, c.Seconds()/a.Seconds())
	}
	n := float64(b.N)
	b.ReportMetric(alone.Seconds()/n, "alone-s")
	b.ReportMetric(cluster.Seconds()/n, "cluster-s")
	b.ReportMetric(aloneCPU.Seconds()/n, "alone-cpu-s")
	b.ReportMetric(clusterCPU.Seconds()/n, "cluster-cpu-s")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "cluster/alone-median")
	b.ReportMetric(slices.Max(ratios), "cluster/alone-max")
	b.ReportMetric(cluster.Seconds()/alone.Seconds(), "cluster/alone")
}

// BenchmarkStageWriteCard is the write stage alone at card speed: the
// floor for flashing a real card.
func BenchmarkStageWriteCard(b *testing.B) {
	_, size := benchImage(b)
	buf := benchChunk(b)[:chunkSize]
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		c, err := openCard(dst)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; off += chunkSize {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Sync(); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkPipelineCard is the whole pipeline (decode, hash, write) onto
// the same card-speed target: with the stages overlapped it should take
// about as long as BenchmarkStageWriteCard.
func BenchmarkPipelineCard(b *testing.B) {
	path, size := benchImage(b)
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		res, err := flashOne(context.Background(), FlashOptions{
			Source: Source{Path: path}, Targets: []string{dst},
			Open: func(p string, _ int64) (Target, error) { return openCard(p) },
		})
		if err != nil || res.Bytes != size {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}
