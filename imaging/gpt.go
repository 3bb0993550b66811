package imaging

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/talosflash/talosflash/imaging/gpt"
)

// A GPT image checks itself: its primary header (LBA 1) carries a CRC of
// itself and of the partition array, and names the LBA of a backup header
// (the image's last sector for Talos images) that carries the same. A
// stream that is cut ends before its backup header; one with altered
// tables fails a CRC. gptCheck wraps the decoded stream so that the
// stream's end, io.EOF, is reported only once both headers and both
// partition arrays were seen and found whole: for a raw image, which has
// no container check, this is the only end check there is, and Talos
// images are GPT, so a cut Talos image never passes.

// gptPeek is how much of the decoded stream is looked at before the target
// is opened: the primary header and, where it lies within (LBA 2 in every
// image tool's layout), the primary partition array.
const gptPeek = 64 << 10

var gptSignature = []byte("EFI PART")

// parseGPTHeader is gpt.ParseHeader (one parser of GPT headers for the
// table reader and this check) with LBAs no card has refused: the stream
// check waits for the bytes they name.
func parseGPTHeader(sec []byte, lba uint64) (gpt.Header, error) {
	h, err := gpt.ParseHeader(sec, lba)
	if err != nil {
		return h, err
	}
	if h.EntryLBA > 1<<40 || h.AltLBA > 1<<40 {
		return h, fmt.Errorf("LBAs beyond any card (array at %d, alternate header at %d)", h.EntryLBA, h.AltLBA)
	}
	return h, nil
}

// region is a byte range of the stream whose CRC32 (IEEE) is taken as it
// passes.
type region struct {
	start, end int64
	crc        uint32
	seen       int64
}

func (r *region) observe(p []byte, off int64) {
	lo, hi := max(off, r.start), min(off+int64(len(p)), r.end)
	if lo < hi {
		r.crc = crc32.Update(r.crc, crc32.IEEETable, p[lo-off:hi-off])
		r.seen += hi - lo
	}
}

func (r *region) whole() bool { return r.seen == r.end-r.start }

// gptStream is the decoded stream of a GPT image, checked as it passes.
type gptStream struct {
	r       io.Reader
	off     int64
	sector  int64
	primary gpt.Header
	// primaryArray and backupArray are the partition arrays' bytes (the
	// backup's where the standard layout puts it, just before its header),
	// backupHdr the backup header's sector.
	primaryArray, backupArray region
	backupHdr                 []byte
	backupAt                  int64
	primaryDone, backupDone   bool
	err                       error
}

// gptCheck looks at the start of the decoded stream (br, not consumed) and
// returns the stream to read: br itself when it holds no GPT (an MBR disk,
// or --force-raw data), else one that checks the GPT as it passes. A
// primary header that is damaged is an error before anything is written.
func gptCheck(br *bufio.Reader) (io.Reader, error) {
	head, err := br.Peek(gptPeek)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	var sector int64
	switch {
	case len(head) >= 1024 && bytes.Equal(head[512:520], gptSignature):
		sector = 512
	case len(head) >= 8192 && bytes.Equal(head[4096:4104], gptSignature):
		sector = 4096
	default:
		if len(head) > 512 && bytes.HasPrefix(gptSignature, head[512:min(520, len(head))]) {
			break // not even a whole signature: the stream ends within it
		}
		return br, nil
	}
	if sector == 0 {
		return nil, errors.New("GPT: the image ends inside its primary header")
	}
	h, err := parseGPTHeader(head[sector:2*sector], 1)
	if err != nil {
		return nil, fmt.Errorf("GPT: primary header: %v", err)
	}
	if h.MyLBA != 1 || h.AltLBA <= 1 || h.EntryLBA < 2 || h.EntryLBA >= h.AltLBA {
		return nil, fmt.Errorf("GPT: primary header at LBA 1 says it is at LBA %d, its backup at LBA %d, its partitions at LBA %d", h.MyLBA, h.AltLBA, h.EntryLBA)
	}
	g := &gptStream{r: br, sector: sector, primary: h}
	g.primaryArray = region{start: int64(h.EntryLBA) * sector}
	g.primaryArray.end = g.primaryArray.start + h.EntryBytes()
	g.backupAt = int64(h.AltLBA) * sector
	arraySectors := (h.EntryBytes() + sector - 1) / sector
	g.backupArray = region{start: g.backupAt - arraySectors*sector, end: g.backupAt - arraySectors*sector + h.EntryBytes()}
	if g.primaryArray.end <= int64(len(head)) {
		// In the peek: a damaged array is found before the target is opened.
		var probe region = g.primaryArray
		probe.observe(head, 0)
		if probe.crc != h.EntryCRC {
			return nil, fmt.Errorf("GPT: primary partition array CRC %08x, the header says %08x", probe.crc, h.EntryCRC)
		}
	}
	return g, nil
}

func (g *gptStream) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	if n > 0 {
		b := p[:n]
		g.primaryArray.observe(b, g.off)
		g.backupArray.observe(b, g.off)
		if lo, hi := max(g.off, g.backupAt), min(g.off+int64(n), g.backupAt+g.sector); lo < hi {
			g.backupHdr = append(g.backupHdr, b[lo-g.off:hi-g.off]...)
		}
		g.off += int64(n)
		if cerr := g.checkPassed(); cerr != nil {
			g.err = cerr
			return n, cerr
		}
	}
	if err == io.EOF && (!g.primaryDone || !g.backupDone) {
		g.err = fmt.Errorf("GPT: the image ends at byte %d, before the end of its backup header at byte %d (LBA %d) that the primary names: it is cut", g.off, g.backupAt+g.sector, g.primary.AltLBA)
		return n, g.err
	}
	return n, err
}

// checkPassed checks each table once the stream has passed all of it.
func (g *gptStream) checkPassed() error {
	h := g.primary
	if !g.primaryDone && g.primaryArray.whole() {
		g.primaryDone = true
		if g.primaryArray.crc != h.EntryCRC {
			return fmt.Errorf("GPT: primary partition array CRC %08x, the header says %08x", g.primaryArray.crc, h.EntryCRC)
		}
	}
	if g.backupDone || int64(len(g.backupHdr)) < g.sector {
		return nil
	}
	g.backupDone = true
	b, err := parseGPTHeader(g.backupHdr, h.AltLBA)
	if err != nil {
		return fmt.Errorf("GPT: backup header at LBA %d: %v", h.AltLBA, err)
	}
	switch {
	case b.MyLBA != h.AltLBA || b.AltLBA != h.MyLBA:
		return fmt.Errorf("GPT: the backup header at LBA %d says it is at LBA %d with its alternate at LBA %d", h.AltLBA, b.MyLBA, b.AltLBA)
	case b.EntryCount != h.EntryCount || b.EntrySize != h.EntrySize || b.EntryCRC != h.EntryCRC ||
		b.FirstUsable != h.FirstUsable || b.LastUsable != h.LastUsable || b.DiskGUID != h.DiskGUID:
		return errors.New("GPT: the backup header describes another disk than the primary")
	}
	// The backup array where every tool puts it, just before its header;
	// one elsewhere is left to the partition tools.
	if int64(b.EntryLBA)*g.sector == g.backupArray.start && g.backupArray.whole() && g.backupArray.crc != b.EntryCRC {
		return fmt.Errorf("GPT: backup partition array CRC %08x, the header says %08x", g.backupArray.crc, b.EntryCRC)
	}
	return nil
}
