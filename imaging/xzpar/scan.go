package xzpar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The container read from its end, without decoding (random access): the
// sizes an xz file declares and, optionally, every block header checked
// against its index record. The one parser of the format: Scan uses the
// same stream-flag, block-header and integer rules as the decoder.

// maxIndexLen bounds the index read into memory (the factory's 1246 MiB
// image in 1 MiB blocks has ~1,250 records, a few KiB).
const maxIndexLen = 64 << 20

// ErrFormat is matched by every error Scan reports about the file's
// structure (not about reading it).
var ErrFormat = errors.New("xz")

// Info is what Scan found.
type Info struct {
	Streams             int
	Blocks              int
	Uncompressed        int64 // total decompressed size from the indexes
	BlockHeadersChecked bool
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// Scan walks the streams of the xz file r (size bytes) from its end:
// stream padding, footer, index, stream header; with checkBlocks every
// block header too. It reads a few KiB, whatever the file's size.
func Scan(r io.ReaderAt, size int64, checkBlocks bool) (Info, error) {
	info := Info{BlockHeadersChecked: checkBlocks}
	err := walkStreams(r, size, checkBlocks, func(st scannedStream) error {
		info.Streams++
		info.Blocks += len(st.records)
		if info.Uncompressed+st.usize < info.Uncompressed {
			return formatErr("uncompressed size overflows")
		}
		info.Uncompressed += st.usize
		return nil
	})
	return info, err
}

// scannedStream is one stream as its index describes it.
type scannedStream struct {
	start   int64 // offset of its stream header
	check   byte
	records []record
	usize   int64 // the records' uncompressed sizes added up
}

// walkStreams calls visit for each stream of the xz file r (size bytes),
// from the last to the first (read from the end, over stream padding).
func walkStreams(r io.ReaderAt, size int64, checkBlocks bool, visit func(scannedStream) error) error {
	if size < streamHeaderLen+streamFooterLen {
		return formatErr("file too short (%d bytes)", size)
	}
	head := make([]byte, len(headerMagic))
	if _, err := r.ReadAt(head, 0); err != nil {
		return fmt.Errorf("read xz header: %w", err)
	}
	if !bytes.Equal(head, headerMagic) {
		return formatErr("not an xz file (bad magic)")
	}
	streams := 0
	for end := size; end > 0; {
		// Stream padding: zero words between and after streams.
		var word [4]byte
		for end >= 4 {
			if _, err := r.ReadAt(word[:], end-4); err != nil {
				return fmt.Errorf("read xz padding: %w", err)
			}
			if word != [4]byte{} {
				break
			}
			end -= 4
		}
		if end == 0 {
			break
		}
		st, err := scanStream(r, end, checkBlocks)
		if err != nil {
			return err
		}
		if err := visit(st); err != nil {
			return err
		}
		streams++
		end = st.start
	}
	if streams == 0 {
		return formatErr("no stream found")
	}
	return nil
}

// scanStream reads the stream that ends at end: where it starts, its check
// type and its index.
func scanStream(r io.ReaderAt, end int64, checkBlocks bool) (st scannedStream, err error) {
	if end < streamHeaderLen+streamFooterLen || end%4 != 0 {
		return st, formatErr("stream ends at %d: bad size or alignment", end)
	}
	var footer [streamFooterLen]byte
	if _, err := r.ReadAt(footer[:], end-streamFooterLen); err != nil {
		return st, fmt.Errorf("read xz footer: %w", err)
	}
	if !bytes.Equal(footer[10:12], footerMagic) {
		return st, formatErr("bad stream footer magic (truncated download?)")
	}
	if crc32.ChecksumIEEE(footer[4:10]) != binary.LittleEndian.Uint32(footer[0:4]) {
		return st, formatErr("stream footer CRC32 mismatch")
	}
	check, err := parseStreamFlags(footer[8:10])
	if err != nil {
		return st, formatErr("stream footer: %v", err)
	}
	indexLen := (int64(binary.LittleEndian.Uint32(footer[4:8])) + 1) * 4
	indexStart := end - streamFooterLen - indexLen
	if indexLen > maxIndexLen || indexStart < streamHeaderLen {
		return st, formatErr("index size %d does not fit the file", indexLen)
	}
	index := make([]byte, indexLen)
	if _, err := r.ReadAt(index, indexStart); err != nil {
		return st, fmt.Errorf("read xz index: %w", err)
	}
	records, err := parseIndex(index)
	if err != nil {
		return st, err
	}
	var blocksLen, usize int64
	for _, rec := range records {
		blocksLen += rec.unpaddedSize + int64(padLen(rec.unpaddedSize))
		usize += rec.uncompressedSize
		if blocksLen < 0 || usize < 0 {
			return st, formatErr("index sizes overflow")
		}
	}
	start := indexStart - blocksLen - streamHeaderLen
	if start < 0 {
		return st, formatErr("index records %d bytes of blocks, more than the file holds", blocksLen)
	}
	var header [streamHeaderLen]byte
	if _, err := r.ReadAt(header[:], start); err != nil {
		return st, fmt.Errorf("read xz stream header: %w", err)
	}
	hc, err := parseStreamHeader(header[:])
	if err != nil {
		return st, formatErr("stream header at offset %d (sizes in the index do not match the file?): %v", start, err)
	}
	if hc != check {
		return st, formatErr("stream header and footer flags differ")
	}
	if checkBlocks {
		off := start + streamHeaderLen
		for i, rec := range records {
			if err := scanBlockHeader(r, off, rec, int64(checkSize(check))); err != nil {
				return st, fmt.Errorf("block %d at offset %d: %w", i, off, err)
			}
			off += rec.unpaddedSize + int64(padLen(rec.unpaddedSize))
		}
	}
	return scannedStream{start: start, check: check, records: records, usize: usize}, nil
}

// parseIndex parses a whole index (indicator through CRC32).
func parseIndex(index []byte) ([]record, error) {
	body, sum := index[:len(index)-4], binary.LittleEndian.Uint32(index[len(index)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, formatErr("index CRC32 mismatch")
	}
	if body[0] != 0 {
		return nil, formatErr("bad index indicator")
	}
	p := body[1:]
	next := func(what string) (uint64, error) {
		v, n, err := uvarint(p)
		if err != nil {
			return 0, formatErr("index %s: %v", what, err)
		}
		p = p[n:]
		return v, nil
	}
	count, err := next("record count")
	if err != nil {
		return nil, err
	}
	if count > uint64(len(body))/2 {
		return nil, formatErr("index record count %d does not fit the index", count)
	}
	records := make([]record, 0, count)
	for i := range count {
		u, err := next("unpadded size")
		if err != nil {
			return nil, err
		}
		c, err := next("uncompressed size")
		if err != nil {
			return nil, err
		}
		if u == 0 || u > 1<<62 || c > 1<<62 {
			return nil, formatErr("bad index record %d", i)
		}
		records = append(records, record{unpaddedSize: int64(u), uncompressedSize: int64(c)})
	}
	if len(p) > 3 || !allZero(p) {
		return nil, formatErr("bad index padding")
	}
	return records, nil
}

// scanBlockHeader checks the block header at off against its index record.
func scanBlockHeader(r io.ReaderAt, off int64, rec record, checkLen int64) error {
	_, err := readBlockHeader(r, off, rec, checkLen)
	if errors.Is(err, errUnsupportedFilter) {
		return nil // a valid block this decoder cannot decode: the decode says so
	}
	return err
}

// readBlockHeader reads the block header at off and checks it against its
// index record; the header returned has both sizes, the index's where the
// header leaves them out. A filter chain this decoder cannot decode is
// errUnsupportedFilter, with the sizes still checked.
func readBlockHeader(r io.ReaderAt, off int64, rec record, checkLen int64) (blockHeader, error) {
	var first [1]byte
	if _, err := r.ReadAt(first[:], off); err != nil {
		return blockHeader{}, fmt.Errorf("read block header: %w", err)
	}
	if first[0] == 0 {
		return blockHeader{}, formatErr("index indicator where a block header was expected")
	}
	hlen := (int64(first[0]) + 1) * 4
	if hlen+checkLen >= rec.unpaddedSize+1 {
		return blockHeader{}, formatErr("block header larger than the block")
	}
	h := make([]byte, hlen)
	if _, err := r.ReadAt(h, off); err != nil {
		return blockHeader{}, fmt.Errorf("read block header: %w", err)
	}
	bh, perr := parseBlockHeader(h)
	if perr != nil && !errors.Is(perr, errUnsupportedFilter) {
		return bh, formatErr("%v", perr)
	}
	comp := rec.unpaddedSize - hlen - checkLen
	if bh.compressedSize >= 0 && bh.compressedSize != comp {
		return bh, formatErr("block compressed size disagrees with the index")
	}
	if bh.uncompressedSize >= 0 && bh.uncompressedSize != rec.uncompressedSize {
		return bh, formatErr("block uncompressed size disagrees with the index")
	}
	bh.compressedSize, bh.uncompressedSize = comp, rec.uncompressedSize
	return bh, perr
}
