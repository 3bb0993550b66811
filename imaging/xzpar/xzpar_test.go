package xzpar

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/ulikunitz/xz"
)

const testImageSize = 1 << 20

var (
	imgOnce sync.Once
	imgRaw  []byte
)

// testImage is a small realistic raw image (GPT, random and text runs, zeros).
func testImage(t testing.TB) []byte {
	t.Helper()
	imgOnce.Do(func() {
		raw, err := imagetest.Raw(testImageSize, 7)
		if err != nil {
			panic(err)
		}
		imgRaw = raw
	})
	return imgRaw
}

func needXZ(t testing.TB) {
	t.Helper()
	if !imagetest.HaveXZBinary() {
		t.Skip("xz binary not installed; apt-get install xz-utils")
	}
}

var (
	xzMemoMu sync.Mutex
	xzMemo   = map[string][]byte{}
)

// xzRun runs the xz binary on stdin data (memoized: tests share fixtures).
func xzRun(t testing.TB, data []byte, args ...string) []byte {
	t.Helper()
	needXZ(t)
	sum := sha256.Sum256(data)
	key := strings.Join(args, " ") + "|" + hex.EncodeToString(sum[:])
	xzMemoMu.Lock()
	defer xzMemoMu.Unlock()
	if out, ok := xzMemo[key]; ok {
		return bytes.Clone(out)
	}
	cmd := exec.Command("xz", args...)
	cmd.Stdin = bytes.NewReader(data)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("xz %v: %v: %s", args, err, stderr.String())
	}
	xzMemo[key] = out.Bytes()
	return bytes.Clone(out.Bytes())
}

// blockInfo is one block as listed by `xz --robot -lvv`.
type blockInfo struct {
	offset, total int64 // compressed offset and size in the file
	sized         bool  // compressed and uncompressed sizes in the header
}

func xzBlocks(t testing.TB, z []byte) []blockInfo {
	t.Helper()
	needXZ(t)
	path := filepath.Join(t.TempDir(), "f.xz")
	if err := os.WriteFile(path, z, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xz", "--robot", "-lvv", path).Output()
	if err != nil {
		t.Fatalf("xz -l: %v", err)
	}
	var bs []blockInfo
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 13 || f[0] != "block" {
			continue
		}
		off, _ := strconv.ParseInt(f[4], 10, 64)
		total, _ := strconv.ParseInt(f[6], 10, 64)
		bs = append(bs, blockInfo{offset: off, total: total, sized: f[12] == "cu"})
	}
	return bs
}

// decode reads everything with Read (io.ReadAll) or WriteTo (io.Copy).
func decode(z []byte, workers int, memLimit int64, viaWriteTo bool) ([]byte, *Reader, error) {
	r, err := newReader(bytes.NewReader(z), workers, memLimit)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	if viaWriteTo {
		var buf bytes.Buffer
		_, err = io.Copy(&buf, r)
		return buf.Bytes(), r, err
	}
	out, err := io.ReadAll(r)
	return out, r, err
}

func ulikunitz(z []byte) ([]byte, error) {
	r, err := xz.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// assertSame decodes z in every mode and compares with want, xz.NewReader
// and, when available, xz -dc.
func assertSame(t *testing.T, z, want []byte) {
	t.Helper()
	if ref, err := ulikunitz(z); err != nil {
		t.Fatalf("xz.NewReader: %v", err)
	} else if !bytes.Equal(ref, want) {
		t.Fatalf("xz.NewReader output differs from the input data")
	}
	if imagetest.HaveXZBinary() {
		if ref := xzRun(t, z, "-dc"); !bytes.Equal(ref, want) {
			t.Fatalf("xz -dc output differs from the input data")
		}
	}
	for _, m := range []struct {
		workers int
		wt      bool
	}{{1, false}, {3, false}, {2, true}} {
		workers, wt := m.workers, m.wt
		{
			got, _, err := decode(z, workers, DefaultMemoryLimit, wt)
			if err != nil {
				t.Fatalf("workers=%d writeTo=%v: %v", workers, wt, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("workers=%d writeTo=%v: output differs (%d bytes, want %d)", workers, wt, len(got), len(want))
			}
		}
	}
}

func TestDecodeMatchesReferences(t *testing.T) {
	needXZ(t)
	raw := testImage(t)
	cases := []struct {
		name       string
		args       []string
		wantBlocks int  // 0: don't care
		wantSized  bool // all blocks carry sizes
	}{
		{"T2 block-size 256KiB", []string{"-T2", "--block-size=256KiB", "-1"}, 4, true},
		{"T0 default", []string{"-T0", "-6"}, 1, true},
		{"T2 preset 0", []string{"-T2", "-0"}, 1, true},
		{"single-threaded", []string{"-T1", "-1"}, 1, false},
		{"single-threaded crc32", []string{"-T1", "-1", "--check=crc32"}, 1, false},
		{"single-threaded sha256", []string{"-T1", "-1", "--check=sha256"}, 1, false},
		{"single-threaded none", []string{"-T1", "-1", "--check=none"}, 1, false},
		{"T2 crc32", []string{"-T2", "--block-size=256KiB", "-1", "--check=crc32"}, 4, true},
		{"T2 crc64", []string{"-T2", "--block-size=256KiB", "-1", "--check=crc64"}, 4, true},
		{"T2 sha256", []string{"-T2", "--block-size=256KiB", "-1", "--check=sha256"}, 4, true},
		{"T2 none", []string{"-T2", "--block-size=256KiB", "-1", "--check=none"}, 4, true},
		{"single-threaded block-size (no sizes)", []string{"-T1", "--block-size=256KiB", "-1"}, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			z := xzRun(t, raw, append([]string{"-c"}, c.args...)...)
			bs := xzBlocks(t, z)
			if c.wantBlocks > 0 && len(bs) != c.wantBlocks {
				t.Fatalf("fixture has %d blocks, want %d", len(bs), c.wantBlocks)
			}
			for _, b := range bs {
				if b.sized != c.wantSized {
					t.Fatalf("fixture block sized=%v, want %v", b.sized, c.wantSized)
				}
			}
			assertSame(t, z, raw)
			_, r, err := decode(z, 2, DefaultMemoryLimit, false)
			if err != nil {
				t.Fatal(err)
			}
			par, str := r.stats()
			if c.wantSized && (par != len(bs) || str != 0) {
				t.Errorf("decoded %d blocks in parallel, %d streamed; want all %d in parallel", par, str, len(bs))
			}
			if !c.wantSized && (par != 0 || str != len(bs)) {
				t.Errorf("decoded %d blocks in parallel, %d streamed; want all %d streamed", par, str, len(bs))
			}
		})
	}
}

func TestUlikunitzWriterOutput(t *testing.T) {
	raw := testImage(t)
	for _, bs := range []int64{0, 1 << 20} {
		z, err := imagetest.XZBytes(raw, bs)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("blocksize=%d", bs), func(t *testing.T) { assertSame(t, z, raw) })
	}
}

func TestEmpty(t *testing.T) {
	needXZ(t)
	for _, args := range [][]string{{"-c", "-T1"}, {"-c", "-T2"}, {"-c", "--check=none"}} {
		z := xzRun(t, nil, args...)
		assertSame(t, z, []byte{})
	}
	if _, err := NewReader(bytes.NewReader(nil), 2); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("empty input: got %v, want a truncated-stream error", err)
	}
	if _, err := NewReader(strings.NewReader("this is not xz data at all"), 2); err == nil {
		t.Fatal("non-xz input: no error")
	}
}

func TestConcatenatedStreamsAndPadding(t *testing.T) {
	needXZ(t)
	raw := testImage(t)
	a, b := raw[:512<<10], raw[512<<10:]
	za := xzRun(t, a, "-c", "-T2", "--block-size=128KiB", "-0")
	zb := xzRun(t, b, "-c", "-T1", "-0", "--check=sha256")
	empty := xzRun(t, nil, "-c")
	pad := make([]byte, 8)
	cases := map[string][][]byte{
		"two streams":              {za, zb},
		"padding between":          {za, pad, zb},
		"padding after":            {za, zb, pad[:4]},
		"empty stream in between":  {za, empty, pad[:4], zb},
		"parallel after streamed":  {zb, za},
		"three streams, mixed pad": {za, pad[:4], zb, pad, za},
	}
	for name, parts := range cases {
		t.Run(name, func(t *testing.T) {
			z := bytes.Join(parts, nil)
			var want []byte
			for _, p := range parts {
				switch {
				case bytes.Equal(p, za):
					want = append(want, a...)
				case bytes.Equal(p, zb):
					want = append(want, b...)
				}
			}
			if want == nil {
				want = []byte{}
			}
			assertSame(t, z, want)
		})
	}
}

// TestSmallMemoryLimit forces sized blocks over the budget onto the
// streaming path and checks that mixing both paths gives the same bytes.
func TestSmallMemoryLimit(t *testing.T) {
	needXZ(t)
	raw := testImage(t)
	z := xzRun(t, raw, "-c", "-T2", "--block-size=256KiB", "-1")
	for _, limit := range []int64{1, 1 << 20, 2 << 20} {
		got, r, err := decode(z, 2, limit, false)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("limit %d: output differs", limit)
		}
		par, str := r.stats()
		t.Logf("limit %d: %d parallel, %d streamed", limit, par, str)
		if limit == 1 && par != 0 {
			t.Errorf("limit 1: %d blocks decoded in parallel, want 0", par)
		}
		if limit == 2<<20 && str != 0 {
			t.Errorf("limit 2 MiB: %d blocks streamed, want 0", str)
		}
	}
}

// multiBlock is a CRC64 fixture with several sized blocks and its data.
func multiBlock(t *testing.T) (z, raw []byte) {
	raw = testImage(t)[:256<<10]
	return xzRun(t, raw, "-c", "-T2", "--block-size=64KiB", "-0"), raw
}

// expectError decodes a damaged z in both read modes and checks for an error
// whose output is a prefix of want (never more, never a silent short result).
func expectError(t *testing.T, what string, z, want []byte, workers int) error {
	t.Helper()
	var first error
	for _, wt := range []bool{false, true} {
		got, _, err := decode(z, workers, DefaultMemoryLimit, wt)
		if err == nil {
			t.Fatalf("%s: no error (got %d bytes, want %d)", what, len(got), len(want))
		}
		if want != nil && !bytes.HasPrefix(want, got) {
			t.Fatalf("%s: output before the error (%d bytes) is not a prefix of the data", what, len(got))
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func TestCorruptByteInEachBlock(t *testing.T) {
	needXZ(t)
	z, raw := multiBlock(t)
	z1 := xzRun(t, raw, "-c", "-T1", "-0")
	for name, f := range map[string][]byte{"sized": z, "single-threaded": z1} {
		bs := xzBlocks(t, f)
		for i, b := range bs {
			// A byte in the header, in the middle of the data, and in the check.
			for _, off := range []int64{b.offset + 1, b.offset + b.total/2, b.offset + b.total - 1} {
				c := bytes.Clone(f)
				c[off] ^= 0x55
				err := expectError(t, fmt.Sprintf("%s: block %d byte %d", name, i+1, off), c, raw, 2)
				if !strings.Contains(err.Error(), fmt.Sprintf("block %d", i+1)) {
					t.Errorf("%s: block %d byte %d: error %q does not name the block", name, i+1, off, err)
				}
			}
		}
	}
}

func TestCorruptMessages(t *testing.T) {
	needXZ(t)
	z, raw := multiBlock(t)
	bs := xzBlocks(t, z)
	c := bytes.Clone(z)
	c[bs[2].offset+bs[2].total-1] ^= 1 // last byte of block 3's CRC64
	err := expectError(t, "check", c, raw, 2)
	if err.Error() != "xz block 3: CRC64 mismatch" {
		t.Errorf("got %q, want %q", err, "xz block 3: CRC64 mismatch")
	}
	// The blocks before the bad one are delivered in full first.
	got, _, _ := decode(c, 2, DefaultMemoryLimit, false)
	if len(got) != 2*64<<10 {
		t.Errorf("delivered %d bytes before the error, want the first 2 blocks (%d)", len(got), 2*64<<10)
	}
}

// TestEveryByteFlipped flips each byte of the container structure and a
// sample of the data: with CRC64 every byte is covered by some check.
func TestEveryByteFlipped(t *testing.T) {
	needXZ(t)
	raw := testImage(t)[:32<<10]
	for name, z := range map[string][]byte{
		"sized":    xzRun(t, raw, "-c", "-T2", "--block-size=8KiB", "-0"),
		"streamed": xzRun(t, raw, "-c", "-T1", "-0"),
	} {
		step := max(1, len(z)/600)
		for off := 0; off < len(z); off++ {
			if off > 64 && off < len(z)-128 && off%step != 0 {
				continue
			}
			c := bytes.Clone(z)
			c[off] ^= 0xFF
			what := fmt.Sprintf("%s: byte %d flipped", name, off)
			got, _, err := decode(c, 2, DefaultMemoryLimit, false)
			if err == nil {
				// lzma.Reader2 does not check the compressed-size field of an
				// LZMA2 chunk header (it stops where the data ends): such a flip
				// still decodes to the right, CRC64-verified bytes, as with
				// xz.NewReader. Anything else must fail.
				ref, rerr := ulikunitz(c)
				if !bytes.Equal(got, raw) || rerr != nil || !bytes.Equal(ref, raw) {
					t.Fatalf("%s: no error, output differs from the data", what)
				}
				continue
			}
			if !bytes.HasPrefix(raw, got) {
				t.Fatalf("%s: output before the error is not a prefix of the data", what)
			}
		}
	}
}

func TestTruncated(t *testing.T) {
	needXZ(t)
	z, raw := multiBlock(t)
	z1 := xzRun(t, raw, "-c", "-T1", "-0")
	for name, f := range map[string][]byte{"sized": z, "single-threaded": z1} {
		cuts := map[int]bool{}
		for i := 0; i < len(f); i += max(1, len(f)/100) {
			cuts[i] = true
		}
		for i := 0; i < 30; i++ { // every cut in the header and the tail
			cuts[i] = true
			cuts[len(f)-1-i] = true
		}
		for _, b := range xzBlocks(t, f) {
			for _, d := range []int64{-1, 0, 1, 2, 5, 12, 13} {
				cuts[int(b.offset+d)] = true
				cuts[int(b.offset+b.total+d)] = true
			}
		}
		for n := range cuts {
			if n < 0 || n >= len(f) {
				continue
			}
			{
				workers := 1 + n%2
				err := expectError(t, fmt.Sprintf("%s: cut at %d of %d", name, n, len(f)), f[:n], raw, workers)
				if n >= 12 && !strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "block") && !strings.Contains(err.Error(), "index") {
					t.Errorf("%s: cut at %d: unclear error %q", name, n, err)
				}
			}
		}
	}
}

func TestTrailingData(t *testing.T) {
	needXZ(t)
	z, raw := multiBlock(t)
	for name, tail := range map[string][]byte{
		"garbage":             []byte("garbage!"),
		"one zero byte":       {0},
		"three zero bytes":    {0, 0, 0},
		"padding then junk":   {0, 0, 0, 0, 1, 2, 3, 4},
		"truncated stream":    z[:20],
		"header only":         z[:12],
		"padding, short junk": {0, 0, 0, 0, 'x'},
	} {
		err := expectError(t, name, append(bytes.Clone(z), tail...), raw, 2)
		t.Logf("%s: %v", name, err)
	}
	// Zero padding in multiples of four is valid.
	assertSame(t, append(bytes.Clone(z), make([]byte, 12)...), raw)
}

func TestIndexMismatch(t *testing.T) {
	needXZ(t)
	// Drop block 2 entirely: the index then lists one more block than found.
	z, _ := multiBlock(t)
	bs := xzBlocks(t, z)
	b := bs[1]
	size := (b.total + 3) &^ 3
	c := append(bytes.Clone(z[:b.offset]), z[b.offset+size:]...)
	// Blocks 1, 3, 4 are each valid, so they are delivered; the index
	// catches the gap (xz -dc behaves the same).
	err := expectError(t, "missing block", c, nil, 2)
	if !strings.Contains(err.Error(), "index") {
		t.Errorf("got %q, want an index error", err)
	}
}

func goroutinesSettle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Errorf("%d goroutines left running, want %d", n, base)
	}
}

func TestCloseEarlyReleasesGoroutines(t *testing.T) {
	needXZ(t)
	z, _ := multiBlock(t)
	base := runtime.NumGoroutine()
	for _, n := range []int{0, 1, 100 << 10} {
		r, err := NewReader(bytes.NewReader(z), 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if _, err := r.Read(make([]byte, 10)); !errors.Is(err, ErrClosed) {
			t.Fatalf("Read after Close: %v, want ErrClosed", err)
		}
	}
	// Errors and normal ends stop the goroutines without Close.
	c := bytes.Clone(z)
	c[len(c)/2] ^= 1
	for _, in := range [][]byte{z, c} {
		r, _ := NewReader(bytes.NewReader(in), 3)
		io.Copy(io.Discard, r)
	}
	goroutinesSettle(t, base)
}

// countingReader counts how far the decoder has read its input.
type countingReader struct {
	mu sync.Mutex
	r  io.Reader
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingReader) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestReadAheadIsBounded checks that a consumer that stops reading stops the
// decoder too: with incompressible 1 MiB blocks, input read ahead is bounded
// by the block count (workers+2) or by the byte budget.
func TestReadAheadIsBounded(t *testing.T) {
	needXZ(t)
	data := make([]byte, 4<<20)
	for i := range data { // incompressible, so compressed block ~ 1 MiB
		data[i] = byte(i*7 + i>>8*13 + i>>16*3)
	}
	seed := uint64(1)
	for i := 0; i+8 <= len(data); i += 8 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		for k := 0; k < 8; k++ {
			data[i+k] = byte(seed >> (8 * k))
		}
	}
	const block = 256 << 10
	z := xzRun(t, data, "-c", "-T2", "--block-size=256KiB", "-0")
	for _, c := range []struct {
		workers  int
		memLimit int64
		maxRead  int64
	}{
		// workers+2 blocks in flight, plus the input buffer.
		{2, DefaultMemoryLimit, inputBufSize + (2+2)*(block+1<<12)},
		// each block costs ~2*256 KiB + 256 KiB dictionary: 2 fit in 1.75 MiB.
		{3, 1<<20 + 3<<18, inputBufSize + 3*(block+1<<12)},
	} {
		cr := &countingReader{r: bytes.NewReader(z)}
		r, err := newReader(cr, c.workers, c.memLimit)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, r, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if n := cr.count(); n > c.maxRead {
			t.Errorf("workers=%d limit=%d: read %d input bytes ahead, want <= %d", c.workers, c.memLimit, n, c.maxRead)
		}
		rest, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(append(data[:1:1], rest...), data) {
			t.Fatalf("after pause: err %v, output differs", err)
		}
		r.Close()
	}
}

func TestUnsupported(t *testing.T) {
	needXZ(t)
	raw := testImage(t)[:256<<10]
	for _, args := range [][]string{
		{"-c", "-T1", "--arm64", "--lzma2=preset=0"},
		{"-c", "-T2", "--block-size=64KiB", "--delta=dist=4", "--lzma2=preset=0"},
	} {
		z := xzRun(t, raw, args...)
		_, _, err := decode(z, 2, DefaultMemoryLimit, false)
		if err == nil || !strings.Contains(err.Error(), "unsupported filter") {
			t.Errorf("xz %v: got %v, want an unsupported filter error", args, err)
		}
	}
	if z := xzRun(t, raw, "-c", "-T1", "--check=crc32"); true {
		z[7] = 0x02 // reserved check type (CRC32 field size), header CRC now wrong too
		if _, err := NewReader(bytes.NewReader(z), 1); err == nil {
			t.Error("reserved check type: no error")
		}
	}
}

// TestCloseUnblocksRead: Close from another goroutine ends a Read waiting
// for input that never comes (a stalled download).
func TestCloseUnblocksRead(t *testing.T) {
	needXZ(t)
	z, _ := multiBlock(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(z[:100]) // header and part of block 1, then nothing
	r, err := NewReader(pr, 2)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Read: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5s after Close")
	}
}
