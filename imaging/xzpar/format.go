package xzpar

// Parsing of the xz container (https://tukaani.org/xz/xz-file-format.txt):
// stream header/footer, block headers, index. Only structure lives here; the
// LZMA2 data itself is decoded by github.com/ulikunitz/xz/lzma (the patched
// fork in third_party/xz: bulk match copies, same output).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"

	"github.com/talosflash/talosflash/third_party/xz/lzma"
)

const (
	streamHeaderLen = 12
	streamFooterLen = 12
	lzma2FilterID   = 0x21
)

var (
	headerMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}
	footerMagic = []byte{'Y', 'Z'}
	crc64Table  = crc64.MakeTable(crc64.ECMA)
)

// Check types (stream flags, second byte) this decoder can verify.
const (
	checkNone   = 0x00
	checkCRC32  = 0x01
	checkCRC64  = 0x04
	checkSHA256 = 0x0A
)

// checkSize returns the size of the Check field for a check type; the spec
// fixes it for all 16 IDs, including the reserved ones.
func checkSize(id byte) int {
	switch {
	case id == 0:
		return 0
	case id <= 3:
		return 4
	case id <= 6:
		return 8
	case id <= 9:
		return 16
	case id <= 12:
		return 32
	default:
		return 64
	}
}

func checkName(id byte) string {
	switch id {
	case checkNone:
		return "none"
	case checkCRC32:
		return "CRC32"
	case checkCRC64:
		return "CRC64"
	case checkSHA256:
		return "SHA-256"
	}
	return fmt.Sprintf("check type %#x", id)
}

// newCheck returns the hash for a supported check type (nil for none).
func newCheck(id byte) hash.Hash {
	switch id {
	case checkCRC32:
		return crc32.NewIEEE()
	case checkCRC64:
		return crc64.New(crc64Table)
	case checkSHA256:
		return sha256.New()
	}
	return nil
}

// checkSum returns the stored form of the check of data: CRC32 and CRC64
// are little endian in xz (hash.Sum is big endian), SHA-256 as is.
func checkSum(id byte, data []byte) []byte {
	switch id {
	case checkCRC32:
		return binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(data))
	case checkCRC64:
		return binary.LittleEndian.AppendUint64(nil, crc64.Checksum(data, crc64Table))
	case checkSHA256:
		s := sha256.Sum256(data)
		return s[:]
	}
	return nil
}

// storedSum converts a running check hash to its stored form.
func storedSum(id byte, h hash.Hash) []byte {
	if h == nil {
		return nil
	}
	s := h.Sum(nil)
	if id == checkCRC32 || id == checkCRC64 {
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
	}
	return s
}

// parseStreamFlags validates the two stream-flag bytes and returns the check type.
func parseStreamFlags(f []byte) (byte, error) {
	if f[0] != 0 || f[1]&0xF0 != 0 {
		return 0, errors.New("unsupported xz stream flags (newer format version?)")
	}
	id := f[1]
	switch id {
	case checkNone, checkCRC32, checkCRC64, checkSHA256:
		return id, nil
	}
	return 0, fmt.Errorf("unsupported xz %s", checkName(id))
}

// parseStreamHeader validates a 12-byte stream header and returns the check type.
func parseStreamHeader(h []byte) (byte, error) {
	if !bytes.Equal(h[:6], headerMagic) {
		return 0, errors.New("not an xz stream (bad magic bytes)")
	}
	if crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:12]) {
		return 0, errors.New("xz stream header: CRC32 mismatch")
	}
	return parseStreamFlags(h[6:8])
}

// blockHeader is what a Block Header says about its block.
type blockHeader struct {
	size             int   // header length in bytes
	compressedSize   int64 // -1 when absent
	uncompressedSize int64 // -1 when absent
	dictCap          int64 // LZMA2 dictionary size
}

// uvarint decodes an xz multibyte integer (at most 9 bytes, no redundant
// trailing zero byte).
func uvarint(p []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(p) && i < 9; i++ {
		b := p[i]
		v |= uint64(b&0x7F) << (7 * i)
		if b&0x80 == 0 {
			if b == 0 && i > 0 {
				return 0, 0, errors.New("non-minimal multibyte integer")
			}
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("bad multibyte integer")
}

// errUnsupportedFilter marks a valid block whose filter chain is not LZMA2
// alone; ulikunitz/xz does not support those either.
var errUnsupportedFilter = errors.New("unsupported filter chain (only LZMA2 alone is supported, not BCJ/delta)")

// parseBlockHeader parses a complete block header h (size byte through CRC32).
func parseBlockHeader(h []byte) (blockHeader, error) {
	bh := blockHeader{size: len(h), compressedSize: -1, uncompressedSize: -1}
	n := len(h)
	if crc32.ChecksumIEEE(h[:n-4]) != binary.LittleEndian.Uint32(h[n-4:]) {
		return bh, errors.New("block header CRC32 mismatch")
	}
	flags := h[1]
	if flags&0x3C != 0 {
		return bh, errors.New("unsupported block header flags")
	}
	p := h[2 : n-4]
	read := func(what string) (uint64, error) {
		v, k, err := uvarint(p)
		if err != nil {
			return 0, fmt.Errorf("block header %s: %w", what, err)
		}
		p = p[k:]
		return v, nil
	}
	const maxSize = 1 << 62
	if flags&0x40 != 0 {
		v, err := read("compressed size")
		if err != nil {
			return bh, err
		}
		if v == 0 || v > maxSize {
			return bh, fmt.Errorf("block header: invalid compressed size %d", v)
		}
		bh.compressedSize = int64(v)
	}
	if flags&0x80 != 0 {
		v, err := read("uncompressed size")
		if err != nil {
			return bh, err
		}
		if v > maxSize {
			return bh, fmt.Errorf("block header: invalid uncompressed size %d", v)
		}
		bh.uncompressedSize = int64(v)
	}
	filters := int(flags&0x03) + 1
	var unsupported bool
	for i := 0; i < filters; i++ {
		id, err := read("filter ID")
		if err != nil {
			return bh, err
		}
		psize, err := read("filter properties size")
		if err != nil {
			return bh, err
		}
		if psize > uint64(len(p)) {
			return bh, errors.New("block header: filter properties overflow the header")
		}
		props := p[:psize]
		p = p[psize:]
		if filters != 1 || id != lzma2FilterID {
			unsupported = true
			continue
		}
		if psize != 1 {
			return bh, errors.New("block header: LZMA2 properties must be 1 byte")
		}
		dc, err := lzma.DecodeDictCap(props[0])
		if err != nil {
			return bh, fmt.Errorf("block header: %w", err)
		}
		bh.dictCap = dc
	}
	for _, b := range p {
		if b != 0 {
			return bh, errors.New("block header: non-zero header padding")
		}
	}
	if unsupported {
		return bh, errUnsupportedFilter
	}
	return bh, nil
}

// padLen is the number of zero bytes that align n to four bytes.
func padLen(n int64) int {
	return int((4 - n%4) % 4)
}

func allZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// record is one index entry.
type record struct {
	unpaddedSize, uncompressedSize int64
}
