package xzpar

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"testing"

	forkxz "github.com/talosflash/talosflash/third_party/xz"
	forklzma "github.com/talosflash/talosflash/third_party/xz/lzma"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// Differential tests of the patched decoder (third_party/xz, bulk match
// copies) against github.com/ulikunitz/xz v0.5.17 from the module proxy and
// the xz tool. The patch only changes how a match is copied inside the
// decoder's circular dictionary, so the inputs are built to have what it
// touches: long overlapping matches at short distances (zero runs, short
// periods), matches longer than the distance, and more output than the
// dictionary holds so source and destination wrap around its end.

// maxForkOut bounds every decode in these tests (no unbounded reads).
const maxForkOut = 4 << 20

// forkDicts are the dictionary sizes streams are built with: the minimum
// (4 KiB: wraps after 4 KiB of output), the factory's xz -0 (256 KiB), 1 MiB.
var forkDicts = []int{forklzma.MinDictCap, 256 << 10, 1 << 20}

// expand turns fuzz bytes into data shaped like what the patch changes:
// a byte below 0x10 followed by n repeats the last (byte+1) output bytes for
// 4n+1 bytes (an overlapping match of period 1..16), a zero byte is a run of
// 300 zeros (longer than LZMA's longest match, 273), anything else is a
// literal. Capped at maxForkOut/2.
func expand(data []byte) []byte {
	out := make([]byte, 0, 4*len(data))
	for i := 0; i < len(data) && len(out) < maxForkOut/2; i++ {
		c := data[i]
		switch {
		case c == 0:
			out = append(out, make([]byte, 300)...)
		case c < 0x10 && i+1 < len(data):
			period, n := int(c)+1, 4*int(data[i+1])+1
			i++
			if len(out) < period {
				out = append(out, c)
				continue
			}
			for range n {
				out = append(out, out[len(out)-period])
			}
		default:
			out = append(out, c)
		}
	}
	return out
}

// decodeBounded reads at most maxForkOut+1 bytes from the reader open
// returns, so both decoders are compared on the same prefix even when
// an input would expand without end.
func decodeBounded(open func() (io.Reader, error)) ([]byte, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(r, maxForkOut+1))
}

// sameResult fails unless both decoders produced the same bytes and the same
// error (both nil, or the same message: the patch changes no error path).
func sameResult(t *testing.T, what string, got []byte, gerr error, want []byte, werr error) {
	t.Helper()
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("%s: fork error %v, upstream error %v", what, gerr, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: fork decoded %d bytes, upstream %d; first difference at %d",
			what, len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// referenceXZ compresses plain with upstream's writer (the reference).
func referenceXZ(t testing.TB, plain []byte, dict int, block int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.WriterConfig{DictCap: dict, BlockSize: block}.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// referenceLZMA compresses plain into the .lzma (LZMA1) format, which goes
// through the same decoder dictionary.
func referenceLZMA(t testing.TB, plain []byte, dict int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := lzma.WriterConfig{DictCap: dict}.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// referenceLZMA2 compresses plain into raw LZMA2 chunks (4 KiB dictionary).
func referenceLZMA2(t testing.TB, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := lzma.Writer2Config{DictCap: lzma.MinDictCap}.NewWriter2(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func forkXZ(z []byte) ([]byte, error) {
	return decodeBounded(func() (io.Reader, error) { return forkxz.NewReader(bytes.NewReader(z)) })
}

func upstreamXZ(z []byte) ([]byte, error) {
	return decodeBounded(func() (io.Reader, error) { return xz.NewReader(bytes.NewReader(z)) })
}

func forkLZMA(z []byte) ([]byte, error) {
	return decodeBounded(func() (io.Reader, error) {
		return forklzma.ReaderConfig{DictCap: 1 << 20}.NewReader(bytes.NewReader(z))
	})
}

func upstreamLZMA(z []byte) ([]byte, error) {
	return decodeBounded(func() (io.Reader, error) {
		return lzma.ReaderConfig{DictCap: 1 << 20}.NewReader(bytes.NewReader(z))
	})
}

// raw LZMA2 chunks with a dictionary we choose (4 KiB: wraps soonest), so
// arbitrary bytes reach the match copy without a header asking for a huge
// dictionary.
func forkLZMA2(z []byte) ([]byte, error) {
	return decodeBounded(func() (io.Reader, error) {
		return forklzma.Reader2Config{DictCap: forklzma.MinDictCap}.NewReader2(bytes.NewReader(z))
	})
}

func upstreamLZMA2(z []byte) ([]byte, error) {
	return decodeBounded(func() (io.Reader, error) {
		return lzma.Reader2Config{DictCap: lzma.MinDictCap}.NewReader2(bytes.NewReader(z))
	})
}

// checkFork runs every comparison for one fuzz input; it is shared by the
// fuzz target and the deterministic test below.
func checkFork(t *testing.T, data []byte, sel byte) {
	plain := expand(data)
	dict := forkDicts[int(sel)%len(forkDicts)]

	// Valid streams from the reference writers: both decoders must return
	// exactly plain.
	var block int64
	if sel&0x10 != 0 {
		block = 16 << 10 // several blocks, a fresh dictionary in each
	}
	z := referenceXZ(t, plain, dict, block)
	got, gerr := forkXZ(z)
	want, werr := upstreamXZ(z)
	sameResult(t, fmt.Sprintf("xz dict %d block %d", dict, block), got, gerr, want, werr)
	if gerr != nil || !bytes.Equal(got, plain) {
		t.Fatalf("xz dict %d: fork does not round-trip (%v, %d of %d bytes)", dict, gerr, len(got), len(plain))
	}
	zl := referenceLZMA(t, plain, dict)
	got, gerr = forkLZMA(zl)
	want, werr = upstreamLZMA(zl)
	sameResult(t, fmt.Sprintf("lzma dict %d", dict), got, gerr, want, werr)
	if gerr != nil || !bytes.Equal(got, plain) {
		t.Fatalf("lzma dict %d: fork does not round-trip (%v)", dict, gerr)
	}

	// A corrupted copy of the stream (one byte flipped past the header) and
	// the raw fuzz bytes: same output, same error.
	if len(z) > 32 {
		bad := bytes.Clone(z)
		bad[12+int(data[0])%(len(bad)-24)] ^= 0x40 | sel
		got, gerr = forkXZ(bad)
		want, werr = upstreamXZ(bad)
		sameResult(t, "corrupted xz", got, gerr, want, werr)
	}
	got, gerr = forkLZMA2(data)
	want, werr = upstreamLZMA2(data)
	sameResult(t, "raw LZMA2 bytes", got, gerr, want, werr)

	// The fork's Reader2.Reset (xzpar reuses one reader per worker): a
	// reader that has decoded a valid stream, reset onto the raw bytes,
	// behaves as a new upstream reader; reset again onto the valid stream,
	// it decodes plain.
	z2 := referenceLZMA2(t, plain)
	lr, err := forklzma.Reader2Config{DictCap: forklzma.MinDictCap}.NewReader2(bytes.NewReader(z2))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(io.LimitReader(lr, maxForkOut+1)); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("raw LZMA2 stream: fork gave %d of %d bytes (%v)", len(got), len(plain), err)
	}
	lr.Reset(bytes.NewReader(data))
	got, gerr = io.ReadAll(io.LimitReader(lr, maxForkOut+1))
	sameResult(t, "raw LZMA2 bytes after Reset", got, gerr, want, werr)
	lr.Reset(bytes.NewReader(z2))
	if got, err := io.ReadAll(io.LimitReader(lr, maxForkOut+1)); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("raw LZMA2 stream after Reset: fork gave %d of %d bytes (%v)", len(got), len(plain), err)
	}
	got, gerr = forkLZMA(data)
	want, werr = upstreamLZMA(data)
	sameResult(t, "raw lzma bytes", got, gerr, want, werr)
}

func forkSeeds() [][]byte {
	raw, err := imagetest.Raw(1<<20, 5)
	if err != nil {
		panic(err)
	}
	seeds := [][]byte{
		{0},
		{'a', 0, 'b', 0x00, 0x00, 0x00},
		{'x', 'y', 'z', 0x02, 0xff, 0x00, 0x0f, 0xff, 'q', 0x00, 0x01, 0x80},
		bytes.Repeat([]byte{'a', 'b', 'c', 0x02, 0x40, 0x00}, 64),
		raw[:6<<10], // MBR/GPT header region of a disk-like image
		raw[1<<19 : 1<<19+8<<10],
	}
	return seeds
}

// FuzzForkMatchesUpstream: the patched decoder and upstream v0.5.17 give the
// same output and the same error on valid streams built from the fuzz
// input at several dictionary sizes (and with several blocks), on a
// corrupted copy, and on the raw fuzz bytes as LZMA2 chunks and .lzma.
func FuzzForkMatchesUpstream(f *testing.F) {
	for i, s := range forkSeeds() {
		f.Add(s, byte(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, sel byte) {
		if len(data) == 0 || len(data) > 64<<10 {
			return
		}
		checkFork(t, data, sel)
	})
}

// xzTool runs xz with args on stdin, output bounded by maxForkOut.
func xzTool(t testing.TB, in []byte, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("xz", args...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	out, rerr := io.ReadAll(io.LimitReader(stdout, maxForkOut+1))
	_, _ = io.Copy(io.Discard, stdout) // let xz finish if it wrote more
	if werr := cmd.Wait(); werr != nil {
		return out, fmt.Errorf("xz %v: %w: %s", args, werr, stderr.String())
	}
	return out, rerr
}

// checkForkXZTool: streams made by the xz tool (liblzma's encoder, whose
// match choices differ from ulikunitz's) decode to the same bytes with the
// fork, and streams made by the reference writer decode to the same bytes
// with xz -dc as with the fork.
func checkForkXZTool(t *testing.T, data []byte, sel byte) {
	plain := expand(data)
	dict := forkDicts[int(sel)%len(forkDicts)]
	preset := []string{"0", "6"}[int(sel>>4)%2]
	filter := fmt.Sprintf("--lzma2=preset=%s,dict=%d", preset, dict)

	z, err := xzTool(t, plain, "-c", "-T1", filter)
	if err != nil {
		t.Fatal(err)
	}
	got, gerr := forkXZ(z)
	if gerr != nil || !bytes.Equal(got, plain) {
		t.Fatalf("xz %s stream: fork gave %d of %d bytes, first difference at %d (%v)",
			filter, len(got), len(plain), firstDiff(got, plain), gerr)
	}
	want, werr := upstreamXZ(z)
	sameResult(t, "xz tool stream", got, gerr, want, werr)

	zl, err := xzTool(t, plain, "-c", "--format=lzma", fmt.Sprintf("--lzma1=preset=%s,dict=%d", preset, dict))
	if err != nil {
		t.Fatal(err)
	}
	if got, gerr := forkLZMA(zl); gerr != nil || !bytes.Equal(got, plain) {
		t.Fatalf("xz --format=lzma stream: fork gave %d of %d bytes (%v)", len(got), len(plain), gerr)
	}

	ref := referenceXZ(t, plain, dict, 0)
	tool, terr := xzTool(t, ref, "-dc")
	got, gerr = forkXZ(ref)
	if terr != nil || gerr != nil || !bytes.Equal(got, tool) || !bytes.Equal(got, plain) {
		t.Fatalf("reference stream: fork %d bytes (%v), xz -dc %d bytes (%v), want %d",
			len(got), gerr, len(tool), terr, len(plain))
	}
}

// FuzzForkMatchesXZTool is the same differential check against the xz tool
// (slower: two xz processes per input). Skipped without the xz binary.
func FuzzForkMatchesXZTool(f *testing.F) {
	needXZ(f)
	for i, s := range forkSeeds() {
		f.Add(s, byte(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, sel byte) {
		if len(data) == 0 || len(data) > 64<<10 {
			return
		}
		checkForkXZTool(t, data, sel)
	})
}

// TestForkEveryShortPeriod covers the patch's cases deterministically:
// every period 1..300 (dist < length, dist == length, dist > length),
// lengths up to the maximum, at each dictionary size with output many
// times the 4 KiB dictionary (so copies wrap), against upstream and xz -dc.
func TestForkEveryShortPeriod(t *testing.T) {
	var plain []byte
	for p := 1; p <= 300; p++ {
		seed := []byte(fmt.Sprintf("<%d|", p))
		for len(seed) < p {
			seed = append(seed, byte(p*7+len(seed)))
		}
		plain = append(plain, seed[:p]...)
		for range 3*273 + p%5 {
			plain = append(plain, plain[len(plain)-p])
		}
	}
	if len(plain) < 64*forklzma.MinDictCap {
		t.Fatalf("test data %d bytes, want many dictionaries", len(plain))
	}
	for _, dict := range forkDicts {
		z := referenceXZ(t, plain, dict, 0)
		got, gerr := forkXZ(z)
		want, werr := upstreamXZ(z)
		sameResult(t, fmt.Sprintf("dict %d", dict), got, gerr, want, werr)
		if !bytes.Equal(got, plain) {
			t.Fatalf("dict %d: fork output differs from the input at %d", dict, firstDiff(got, plain))
		}
		if imagetest.HaveXZBinary() {
			tool, err := xzTool(t, z, "-dc")
			if err != nil || !bytes.Equal(tool, got) {
				t.Fatalf("dict %d: xz -dc gave %d bytes (%v), fork %d", dict, len(tool), err, len(got))
			}
		}
	}
	// The fuzz checks on their seeds, also when not fuzzing.
	for i, s := range forkSeeds() {
		checkFork(t, s, byte(i))
		if imagetest.HaveXZBinary() {
			checkForkXZTool(t, s, byte(i))
		}
	}
}

// TestForkReportsSameErrors: a truncated stream fails the same way in both.
func TestForkReportsSameErrors(t *testing.T) {
	plain := expand(bytes.Repeat([]byte{'z', 0, 0x03, 0x20}, 200))
	z := referenceXZ(t, plain, forklzma.MinDictCap, 0)
	for _, cut := range []int{len(z) / 3, len(z) / 2, len(z) - 5} {
		got, gerr := forkXZ(z[:cut])
		want, werr := upstreamXZ(z[:cut])
		if gerr == nil {
			t.Fatalf("cut %d: fork accepted a truncated stream", cut)
		}
		sameResult(t, fmt.Sprintf("cut at %d", cut), got, gerr, want, werr)
	}
}
