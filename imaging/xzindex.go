package imaging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ErrCorruptImage reports an xz file whose container structure or data is
// damaged (bad magic, CRC, index, sizes, or a decode error). errors.Is-able.
var ErrCorruptImage = errors.New("image is corrupt")

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

const (
	xzHeaderLen = 12
	xzFooterLen = 12
	// maxIndexLen bounds the memory used to read an index (a 1.3 GiB image
	// has a few hundred records; 64 MiB is millions).
	maxIndexLen = 64 << 20
)

// XZInfo describes an xz file as recorded in its stream headers, indexes
// and footers.
type XZInfo struct {
	Streams      int
	Blocks       int
	Uncompressed int64 // total decompressed size from the indexes
	// BlockHeadersChecked is true when every block header was read and its
	// CRC32 (and recorded sizes) checked against the index.
	BlockHeadersChecked bool
}

// XZUncompressedSize returns the decompressed size recorded in the index of
// every stream of an xz file of the given size, reading only the stream
// headers, footers and indexes (a few KiB). It validates their magic bytes,
// CRC32s and that the recorded sizes add up to the file size exactly.
func XZUncompressedSize(r io.ReaderAt, size int64) (int64, error) {
	info, err := scanXZ(r, size, false)
	if err != nil {
		return 0, err
	}
	return info.Uncompressed, nil
}

// CheckXZ validates the xz container without decompressing: everything
// XZUncompressedSize checks plus every block header (CRC32, and its
// compressed/uncompressed size fields when present against the index). This
// costs one small read per block. Block data checks (CRC64/SHA-256 of the
// decompressed block) need a full decode and happen while flashing.
func CheckXZ(r io.ReaderAt, size int64) (*XZInfo, error) {
	return scanXZ(r, size, true)
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: xz: %s", ErrCorruptImage, fmt.Sprintf(format, args...))
}

// scanXZ walks the file backwards, stream by stream, as the xz format
// allows: [stream padding] footer -> index -> blocks -> header.
func scanXZ(r io.ReaderAt, size int64, checkBlocks bool) (*XZInfo, error) {
	info := &XZInfo{BlockHeadersChecked: checkBlocks}
	if size < xzHeaderLen+xzFooterLen {
		return nil, corruptf("file too short (%d bytes)", size)
	}
	head := make([]byte, len(xzMagic))
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, fmt.Errorf("read xz header: %w", err)
	}
	if !bytes.Equal(head, xzMagic) {
		return nil, corruptf("not an xz file (bad magic)")
	}
	end := size
	for end > 0 {
		// Stream padding: zero bytes in multiples of 4 after a stream.
		var word [4]byte
		for end >= 4 {
			if _, err := r.ReadAt(word[:], end-4); err != nil {
				return nil, fmt.Errorf("read xz padding: %w", err)
			}
			if word != [4]byte{} {
				break
			}
			end -= 4
		}
		if end == 0 {
			break
		}
		start, blocks, usize, err := scanStream(r, end, checkBlocks)
		if err != nil {
			return nil, err
		}
		info.Streams++
		info.Blocks += blocks
		if info.Uncompressed+usize < info.Uncompressed {
			return nil, corruptf("uncompressed size overflows")
		}
		info.Uncompressed += usize
		end = start
	}
	if info.Streams == 0 {
		return nil, corruptf("no stream found")
	}
	return info, nil
}

// scanStream checks the stream that ends at end and returns its start.
func scanStream(r io.ReaderAt, end int64, checkBlocks bool) (start int64, blocks int, usize int64, err error) {
	if end < xzHeaderLen+xzFooterLen || end%4 != 0 {
		return 0, 0, 0, corruptf("stream ends at %d: bad size or alignment", end)
	}
	footer := make([]byte, xzFooterLen)
	if _, err := r.ReadAt(footer, end-xzFooterLen); err != nil {
		return 0, 0, 0, fmt.Errorf("read xz footer: %w", err)
	}
	if footer[10] != 'Y' || footer[11] != 'Z' {
		return 0, 0, 0, corruptf("bad stream footer magic (truncated download?)")
	}
	if crc32.ChecksumIEEE(footer[4:10]) != binary.LittleEndian.Uint32(footer[0:4]) {
		return 0, 0, 0, corruptf("stream footer CRC32 mismatch")
	}
	flags := footer[8:10]
	checkLen, err := xzCheckLen(flags)
	if err != nil {
		return 0, 0, 0, err
	}
	indexLen := (int64(binary.LittleEndian.Uint32(footer[4:8])) + 1) * 4
	indexStart := end - xzFooterLen - indexLen
	if indexLen > maxIndexLen || indexStart < xzHeaderLen {
		return 0, 0, 0, corruptf("index size %d does not fit the file", indexLen)
	}
	index := make([]byte, indexLen)
	if _, err := r.ReadAt(index, indexStart); err != nil {
		return 0, 0, 0, fmt.Errorf("read xz index: %w", err)
	}
	records, err := parseIndex(index)
	if err != nil {
		return 0, 0, 0, err
	}
	var blocksLen int64
	for _, rec := range records {
		blocksLen += (rec.unpadded + 3) &^ 3
		usize += rec.uncompressed
		if blocksLen < 0 || usize < 0 {
			return 0, 0, 0, corruptf("index sizes overflow")
		}
	}
	start = indexStart - blocksLen - xzHeaderLen
	if start < 0 {
		return 0, 0, 0, corruptf("index records %d bytes of blocks, more than the file holds", blocksLen)
	}
	header := make([]byte, xzHeaderLen)
	if _, err := r.ReadAt(header, start); err != nil {
		return 0, 0, 0, fmt.Errorf("read xz stream header: %w", err)
	}
	if !bytes.Equal(header[:6], xzMagic) {
		return 0, 0, 0, corruptf("no stream header at offset %d (sizes in index do not match the file)", start)
	}
	if crc32.ChecksumIEEE(header[6:8]) != binary.LittleEndian.Uint32(header[8:12]) {
		return 0, 0, 0, corruptf("stream header CRC32 mismatch")
	}
	if !bytes.Equal(header[6:8], flags) {
		return 0, 0, 0, corruptf("stream header and footer flags differ")
	}
	if checkBlocks {
		off := start + xzHeaderLen
		for i, rec := range records {
			if err := checkBlockHeader(r, off, rec, checkLen); err != nil {
				return 0, 0, 0, fmt.Errorf("block %d at offset %d: %w", i, off, err)
			}
			off += (rec.unpadded + 3) &^ 3
		}
	}
	return start, len(records), usize, nil
}

func xzCheckLen(flags []byte) (int64, error) {
	if flags[0] != 0 || flags[1] > 0x0F {
		return 0, corruptf("unsupported stream flags %x", flags)
	}
	id := flags[1]
	switch {
	case id == 0:
		return 0, nil
	case id <= 3:
		return 4, nil
	case id <= 6:
		return 8, nil
	case id <= 9:
		return 16, nil
	case id <= 12:
		return 32, nil
	default:
		return 64, nil
	}
}

type xzRecord struct{ unpadded, uncompressed int64 }

func parseIndex(index []byte) ([]xzRecord, error) {
	body, sum := index[:len(index)-4], binary.LittleEndian.Uint32(index[len(index)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, corruptf("index CRC32 mismatch")
	}
	if body[0] != 0 {
		return nil, corruptf("bad index indicator")
	}
	br := bytes.NewReader(body[1:])
	n, err := binary.ReadUvarint(br)
	if err != nil || n > uint64(len(body))/2 {
		return nil, corruptf("bad index record count")
	}
	records := make([]xzRecord, 0, n)
	for i := uint64(0); i < n; i++ {
		u, err1 := binary.ReadUvarint(br)
		c, err2 := binary.ReadUvarint(br)
		if err1 != nil || err2 != nil || u == 0 || u > 1<<62 || c > 1<<62 {
			return nil, corruptf("bad index record %d", i)
		}
		records = append(records, xzRecord{int64(u), int64(c)})
	}
	// Index padding: zeros up to a multiple of four.
	rest := body[len(body)-br.Len():]
	if len(rest) > 3 || !bytes.Equal(rest, make([]byte, len(rest))) {
		return nil, corruptf("bad index padding")
	}
	return records, nil
}

func checkBlockHeader(r io.ReaderAt, off int64, rec xzRecord, checkLen int64) error {
	var first [1]byte
	if _, err := r.ReadAt(first[:], off); err != nil {
		return fmt.Errorf("read block header: %w", err)
	}
	if first[0] == 0 {
		return corruptf("index indicator where a block header was expected")
	}
	hlen := (int64(first[0]) + 1) * 4
	if hlen+checkLen >= rec.unpadded+1 {
		return corruptf("block header larger than the block")
	}
	h := make([]byte, hlen)
	if _, err := r.ReadAt(h, off); err != nil {
		return fmt.Errorf("read block header: %w", err)
	}
	if crc32.ChecksumIEEE(h[:hlen-4]) != binary.LittleEndian.Uint32(h[hlen-4:]) {
		return corruptf("block header CRC32 mismatch")
	}
	flags := h[1]
	br := bytes.NewReader(h[2 : hlen-4])
	if flags&0x40 != 0 {
		c, err := binary.ReadUvarint(br)
		if err != nil || int64(c) != rec.unpadded-hlen-checkLen {
			return corruptf("block compressed size disagrees with the index")
		}
	}
	if flags&0x80 != 0 {
		u, err := binary.ReadUvarint(br)
		if err != nil || int64(u) != rec.uncompressed {
			return corruptf("block uncompressed size disagrees with the index")
		}
	}
	return nil
}
