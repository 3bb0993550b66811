// Package imagetest generates deterministic, realistic-looking raw disk
// images (and their xz-compressed forms) for tests and benchmarks of the
// imaging pipeline.
//
// The layout mimics a Talos metal image: a protective MBR and a GPT header
// with partition entries, then a handful of partitions whose contents mix
// incompressible data (like squashfs), compressible text-like data (like
// configs and FAT metadata) and long zero runs, and a backup GPT at the end.
// Everything is a pure function of (size, seed), generated in chunks, so a
// 1 GiB image can be streamed without holding it in memory.
package imagetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
)

// MinSize is the smallest image WriteRaw accepts.
const MinSize = 1 << 20

const sector = 512

type extentKind int

const (
	kindZero   extentKind = iota
	kindRandom            // incompressible, like a squashfs
	kindText              // compressible, like configs / filesystem metadata
)

type extent struct {
	off, len int64
	kind     extentKind
	stream   uint64 // per-extent PRNG stream, so content is independent of chunking
}

// layout returns the header bytes (first 34 sectors and the backup GPT)
// and the data extents for an image of the given size.
func layout(size, seed int64) ([]extent, []byte, []byte) {
	const mib = 1 << 20
	var ex []extent
	// Partitions start at 1 MiB for images >= 8 MiB, else at 34 sectors.
	start := int64(mib)
	if size < 8*mib {
		start = 34 * sector
	}
	usable := size - start - 33*sector
	// Partition table: name, share of usable space, how much of it is data.
	type part struct {
		name   string
		share  float64 // of usable space
		fill   float64 // fraction of the partition holding data
		random float64 // fraction of the data that is incompressible
	}
	parts := []part{
		{"EFI", 0.08, 0.6, 0.7},
		{"BIOS", 0.01, 0.5, 0.0},
		{"BOOT", 0.10, 0.7, 0.8},
		{"META", 0.01, 0.2, 0.0},
		{"STATE", 0.05, 0.1, 0.0},
		{"EPHEMERAL", 0.75, 0.01, 0.5},
	}
	hdr := make([]byte, 34*sector)
	entries := hdr[2*sector:]
	off := start
	stream := uint64(1)
	for i, p := range parts {
		plen := int64(float64(usable)*p.share) / sector * sector
		if i == len(parts)-1 {
			plen = (size - 33*sector - off) / sector * sector
		}
		if plen <= 0 {
			continue
		}
		// GPT entry (128 bytes): type GUID, unique GUID, first/last LBA, attrs, UTF-16 name.
		e := entries[i*128 : (i+1)*128]
		r := rand.New(rand.NewPCG(uint64(seed), uint64(1000+i)))
		for j := 0; j < 32; j++ {
			e[j] = byte(r.Uint32())
		}
		binary.LittleEndian.PutUint64(e[32:], uint64(off/sector))
		binary.LittleEndian.PutUint64(e[40:], uint64((off+plen)/sector-1))
		for j, c := range p.name {
			binary.LittleEndian.PutUint16(e[56+2*j:], uint16(c))
		}
		// Data in the partition: a few data runs separated by zero runs.
		dataLen := int64(float64(plen)*p.fill) / sector * sector
		runs := int64(4)
		if dataLen < runs*sector {
			runs = 1
		}
		runLen := dataLen / runs / sector * sector
		gap := (plen - runLen*runs) / runs / sector * sector
		pos := off
		for k := int64(0); k < runs && runLen > 0; k++ {
			randLen := int64(float64(runLen)*p.random) / sector * sector
			if randLen > 0 {
				ex = append(ex, extent{pos, randLen, kindRandom, stream})
				stream++
			}
			if runLen-randLen > 0 {
				ex = append(ex, extent{pos + randLen, runLen - randLen, kindText, stream})
				stream++
			}
			pos += runLen + gap
		}
		off += plen
	}
	// Protective MBR.
	mbr := hdr[:sector]
	copy(mbr[0:], "TALOSFLASH-TEST-IMAGE")
	pe := mbr[446:]
	pe[4] = 0xEE
	binary.LittleEndian.PutUint32(pe[8:], 1)
	total := size / sector
	if total-1 > 0xFFFFFFFF {
		binary.LittleEndian.PutUint32(pe[12:], 0xFFFFFFFF)
	} else {
		binary.LittleEndian.PutUint32(pe[12:], uint32(total-1))
	}
	mbr[510], mbr[511] = 0x55, 0xAA
	// GPT header.
	gpt := hdr[sector : 2*sector]
	copy(gpt, "EFI PART")
	binary.LittleEndian.PutUint32(gpt[8:], 0x00010000)
	binary.LittleEndian.PutUint32(gpt[12:], 92)
	binary.LittleEndian.PutUint64(gpt[24:], 1)
	binary.LittleEndian.PutUint64(gpt[32:], uint64(total-1))
	binary.LittleEndian.PutUint64(gpt[40:], 34)
	binary.LittleEndian.PutUint64(gpt[48:], uint64(total-34))
	binary.LittleEndian.PutUint64(gpt[72:], 2)
	binary.LittleEndian.PutUint32(gpt[80:], 128)
	binary.LittleEndian.PutUint32(gpt[84:], 128)
	binary.LittleEndian.PutUint32(gpt[88:], crc32.ChecksumIEEE(entries[:128*128]))
	binary.LittleEndian.PutUint32(gpt[16:], crc32.ChecksumIEEE(gpt[:92]))
	// Backup: partition entries + header in the last 33 sectors. The
	// backup header names itself, the primary as its alternate and its own
	// entries, with its own CRC: a valid GPT, as the pipeline checks.
	backup := make([]byte, 33*sector)
	copy(backup, entries[:32*sector])
	bgpt := backup[32*sector:]
	copy(bgpt, gpt)
	binary.LittleEndian.PutUint64(bgpt[24:], uint64(total-1))
	binary.LittleEndian.PutUint64(bgpt[32:], 1)
	binary.LittleEndian.PutUint64(bgpt[72:], uint64(total-33))
	binary.LittleEndian.PutUint32(bgpt[16:], 0)
	binary.LittleEndian.PutUint32(bgpt[16:], crc32.ChecksumIEEE(bgpt[:92]))
	return ex, hdr, backup
}

// WriteRaw streams a deterministic raw disk image of exactly size bytes to w.
// The same (size, seed) always yields the same bytes.
func WriteRaw(w io.Writer, size int64, seed int64) error {
	if size < MinSize || size%sector != 0 {
		return fmt.Errorf("imagetest: size %d must be a multiple of %d and >= %d", size, sector, MinSize)
	}
	ex, hdr, backup := layout(size, seed)
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	words := dictionary(seed)
	rngs := map[uint64]*rand.Rand{}
	var pos int64
	for pos < size {
		n := min(int64(chunk), size-pos)
		b := buf[:n]
		clear(b)
		fillChunk(b, pos, size, ex, hdr, backup, words, rngs, seed)
		if _, err := w.Write(b); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

func fillChunk(b []byte, pos, size int64, ex []extent, hdr, backup []byte, words [][]byte, rngs map[uint64]*rand.Rand, seed int64) {
	end := pos + int64(len(b))
	overlay := func(off int64, data []byte) {
		lo, hi := max(pos, off), min(end, off+int64(len(data)))
		if lo < hi {
			copy(b[lo-pos:hi-pos], data[lo-off:hi-off])
		}
	}
	overlay(0, hdr)
	overlay(size-int64(len(backup)), backup)
	for _, e := range ex {
		lo, hi := max(pos, e.off), min(end, e.off+e.len)
		if lo >= hi {
			continue
		}
		// Extents are visited in order and chunks are contiguous, so a per-extent
		// generator advanced sequentially yields chunk-independent content.
		r, ok := rngs[e.stream]
		if !ok {
			r = rand.New(rand.NewPCG(uint64(seed), e.stream))
			rngs[e.stream] = r
		}
		dst := b[lo-pos : hi-pos]
		switch e.kind {
		case kindRandom:
			for i := 0; i+8 <= len(dst); i += 8 {
				binary.LittleEndian.PutUint64(dst[i:], r.Uint64())
			}
		case kindText:
			fillText(dst, r, words)
		}
		if hi == e.off+e.len {
			delete(rngs, e.stream)
		}
	}
}

// fillText writes words from a small dictionary: compresses roughly 3-5x.
// Each sector is filled independently so the output does not depend on
// where chunk boundaries fall (extents and chunks are sector aligned).
func fillText(dst []byte, r *rand.Rand, words [][]byte) {
	for s := 0; s < len(dst); s += sector {
		sec := dst[s:min(s+sector, len(dst))]
		i := 0
		for i < len(sec) {
			v := r.Uint64()
			for k := 0; k < 4 && i < len(sec); k++ {
				w := words[v&0xFF]
				v >>= 16
				i += copy(sec[i:], w)
				if i < len(sec) {
					sec[i] = ' '
					i++
				}
			}
		}
	}
}

func dictionary(seed int64) [][]byte {
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	words := make([][]byte, 256)
	for i := range words {
		w := make([]byte, 2+r.IntN(9))
		for j := range w {
			w[j] = byte('a' + r.IntN(26))
		}
		words[i] = w
	}
	return words
}

// Raw returns the whole image in memory (for small test images).
func Raw(size, seed int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(size))
	if err := WriteRaw(&buf, size, seed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RawSHA256 returns the hex SHA-256 of the image without keeping it in memory.
func RawSHA256(size, seed int64) (string, error) {
	h := sha256.New()
	if err := WriteRaw(h, size, seed); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Reader returns a streaming reader of the image (generated in a goroutine).
func Reader(size, seed int64) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteRaw(pw, size, seed)) }()
	return pr
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
