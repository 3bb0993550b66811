package xzpar

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/talosflash/talosflash/third_party/xz/lzma"
)

// ReaderAt is random access to the decoded data of an xz file: the blocks'
// places come from the streams' indexes (Scan's walk from the end, a few
// KiB read), and ReadAt decodes only the blocks that cover the range it is
// asked for. A multi-block file (the factory's xz -0 -T0: 1 MiB blocks)
// then costs a block or two per read, whatever the range's offset.
//
// Each block's header is checked against its index record. A block within
// the memory budget is decoded whole and checked (its padding, its check,
// its sizes) before any of its bytes are returned, as NewReader's parallel
// blocks are. A larger one (single-threaded xz writes one block for the
// whole file) is decoded from its start up to the range's end, no further:
// its check, at its end, is not verified; the bytes are the decoder's, and
// a caller that relies on them compares them with a full decode later
// (imaging does, as the flash's stream passes them).
type ReaderAt struct {
	r        io.ReaderAt
	blocks   []blockAt // in decoded order
	size     int64     // decoded
	memLimit int64

	mu sync.Mutex // ReadAt calls share br
	br blockReader
}

// blockAt is one block: where it lies in the file and in the decoded data.
type blockAt struct {
	num   int   // 1-based, for messages
	off   int64 // its block header, in the file
	uoff  int64 // its first decoded byte
	rec   record
	check byte
}

// maxRandomBlocks bounds the blocks NewReaderAt indexes (48 bytes each in
// memory): a file with more (1 TiB in the factory's 1 MiB blocks) is
// ErrTooManyBlocks, to be read in order instead.
var maxRandomBlocks = 1 << 20

// ErrTooManyBlocks: the file has more blocks than NewReaderAt indexes
// (over a million).
var ErrTooManyBlocks = errors.New("xz: too many blocks to index for random access")

// NewReaderAt indexes the xz file r (size bytes) for ReadAt: its streams'
// footers, indexes and headers (Scan's checks), no block decoded.
func NewReaderAt(r io.ReaderAt, size int64) (*ReaderAt, error) {
	var streams []scannedStream
	blocks := 0
	err := walkStreams(r, size, false, func(st scannedStream) error {
		if blocks += len(st.records); blocks > maxRandomBlocks {
			return fmt.Errorf("%w (more than %d)", ErrTooManyBlocks, maxRandomBlocks)
		}
		streams = append(streams, st)
		return nil
	})
	if err != nil {
		return nil, err
	}
	x := &ReaderAt{r: r, memLimit: DefaultMemoryLimit, blocks: make([]blockAt, 0, blocks)}
	for i := len(streams) - 1; i >= 0; i-- { // walked from the end
		st := streams[i]
		off := st.start + streamHeaderLen
		for _, rec := range st.records {
			x.blocks = append(x.blocks, blockAt{num: len(x.blocks) + 1, off: off, uoff: x.size, rec: rec, check: st.check})
			off += rec.unpaddedSize + int64(padLen(rec.unpaddedSize))
			if x.size+rec.uncompressedSize < x.size {
				return nil, formatErr("uncompressed size overflows")
			}
			x.size += rec.uncompressedSize
		}
	}
	return x, nil
}

// Size is the decoded size the indexes add up to.
func (x *ReaderAt) Size() int64 { return x.size }

// ReadAt reads len(p) decoded bytes at off, decoding the blocks that hold
// them; fewer only at the decoded end (io.EOF). Safe for concurrent use
// (one call at a time).
func (x *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("xz: negative offset")
	}
	if off >= x.size {
		return 0, io.EOF
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.blocks), func(i int) bool {
		b := x.blocks[i]
		return b.uoff+b.rec.uncompressedSize > off
	})
	n := 0
	for ; n < len(p) && i < len(x.blocks); i++ {
		b := x.blocks[i]
		from := off + int64(n) - b.uoff
		want := min(int64(len(p)-n), b.rec.uncompressedSize-from)
		if want <= 0 {
			continue // an empty block
		}
		if err := x.decode(b, from, p[n:n+int(want)]); err != nil {
			return n, err
		}
		n += int(want)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// decode fills dst with block b's decoded bytes from its byte from on.
func (x *ReaderAt) decode(b blockAt, from int64, dst []byte) error {
	cs := int64(checkSize(b.check))
	bh, err := readBlockHeader(x.r, b.off, b.rec, cs)
	if err != nil {
		return fmt.Errorf("xz block %d at offset %d: %w", b.num, b.off, err)
	}
	comp, usize := bh.compressedSize, bh.uncompressedSize
	dict := min(bh.dictCap, max(usize, lzma.MinDictCap))
	data := b.off + int64(bh.size)
	if cost := comp + 3 + cs + usize + dict; cost <= x.memLimit {
		j := &job{block: b.num, hdr: bh, check: b.check, payload: make([]byte, comp+int64(padLen(comp))+cs)}
		if _, err := x.r.ReadAt(j.payload, data); err != nil {
			return fmt.Errorf("xz block %d: read: %w", b.num, err)
		}
		out, err := decodeBlock(j, make([]byte, usize), &x.br)
		if err != nil {
			return err
		}
		copy(dst, out[from:])
		return nil
	}
	if limit := maxStreamDict(x.memLimit); dict > limit {
		return fmt.Errorf("xz block %d: LZMA2 dictionary of %d MiB is larger than supported (%d MiB)", b.num, dict>>20, limit>>20)
	}
	return decodePrefix(b.num, io.NewSectionReader(x.r, data, comp), dict, from, dst)
}

// decodePrefix decodes a block's LZMA2 data from its start, discards from
// bytes and fills dst: a block too large to decode whole, read no further
// than asked (its own reader: a fresh dictionary, not kept).
func decodePrefix(num int, src io.Reader, dict, from int64, dst []byte) (err error) {
	defer func() {
		if r := recover(); r != nil { // malformed data must not crash the app
			err = fmt.Errorf("xz block %d: LZMA2 decoder failure: %v", num, r)
		}
	}()
	lr, err := lzma.Reader2Config{DictCap: int(dict)}.NewReader2(src)
	if err != nil {
		return fmt.Errorf("xz block %d: %w", num, err)
	}
	if _, err := io.CopyN(io.Discard, lr, from); err != nil {
		return fmt.Errorf("xz block %d: data ends before byte %d: %w", num, from, err)
	}
	if _, err := io.ReadFull(lr, dst); err != nil {
		return fmt.Errorf("xz block %d: data ends before the uncompressed size in the index: %w", num, err)
	}
	return nil
}
