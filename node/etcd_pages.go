package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// checkBoltPages walks a bbolt database's page tree with bounded reads
// before bbolt itself reads it. bbolt trusts its file: it reads pages
// through a mapping and follows page numbers, overflow counts and element
// offsets as written, so a damaged file (only possible here with
// --recover-skip-hash-check: the SHA-256 trailer refuses it otherwise) can
// fault past the mapping, loop on a page that points back at itself, or
// have tx.Check build a map over a four-billion-page overflow. This walk
// reads each reachable page once, from the file, and accepts only
// numbers inside the file: every page below the meta's high-water mark
// within size, each page reached once, elements and keys inside their
// page, the freelist's ids inside its page. Its cost is one read of the
// reachable pages.
//
// The format is bbolt's (go.etcd.io/bbolt internal/common: page.go,
// meta.go, types.go; bucket.go for inline buckets), little-endian as the
// arm64 and amd64 machines that write it.
func checkBoltPages(f io.ReaderAt, size int64) error {
	m, err := readBoltMeta(f, size)
	if err != nil {
		return err
	}
	w := &boltWalk{f: f, pageSize: int64(m.pageSize), hwm: m.pgid, seen: map[uint64]bool{0: true, 1: true}}
	if m.freelist != boltNoFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	return w.bucket(m.root, nil, 0)
}

// bbolt's on-disk constants (internal/common/types.go, page.go).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltNoFreelist   = ^uint64(0)
	boltPageHeader   = 16 // id u64, flags u16, count u16, overflow u32
	boltElement      = 16 // a branch's (pos, ksize, pgid) or a leaf's (flags, pos, ksize, vsize)
	boltBucketHeader = 16 // root pgid u64, sequence u64
	boltBranch       = 0x01
	boltLeaf         = 0x02
	boltFreelist     = 0x10
	boltBucketLeaf   = 0x01
	boltMaxDepth     = 64 // nested buckets and tree levels; etcd's are 2 and a few
)

type boltMeta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

// readBoltMeta is the meta page bbolt would use: the valid one of pages 0
// and 1 with the higher transaction id (db.go meta), its high-water mark
// inside the file.
func readBoltMeta(f io.ReaderAt, size int64) (*boltMeta, error) {
	var best *boltMeta
	pageSize := int64(4096) // page 1's place when page 0 cannot say (bbolt: the OS page size)
	for i := int64(0); i < 2; i++ {
		buf := make([]byte, boltPageHeader+64)
		if _, err := f.ReadAt(buf, i*pageSize); err != nil {
			continue
		}
		d := buf[boltPageHeader:]
		m := &boltMeta{pageSize: le32(d[8:]), root: le64(d[16:]), freelist: le64(d[32:]), pgid: le64(d[40:]), txid: le64(d[48:])}
		h := fnv.New64a()
		h.Write(d[:56])
		if le32(d[0:]) != boltMagic || le32(d[4:]) != boltVersion || le64(d[56:]) != h.Sum64() {
			continue
		}
		if i == 0 {
			pageSize = int64(m.pageSize)
		}
		if best == nil || m.txid > best.txid {
			best = m
		}
	}
	switch {
	case best == nil:
		return nil, errors.New("no valid meta page")
	case best.pageSize < 512 || best.pageSize > 1<<20 || best.pageSize&(best.pageSize-1) != 0:
		return nil, fmt.Errorf("page size %d", best.pageSize)
	case best.pgid < 2 || best.pgid > uint64(size)/uint64(best.pageSize):
		return nil, fmt.Errorf("cut short: the database says it holds %d pages of %d bytes, the file has %d bytes", best.pgid, best.pageSize, size)
	case best.freelist != boltNoFreelist && (best.freelist < 2 || best.freelist >= best.pgid):
		return nil, fmt.Errorf("freelist page %d outside the database's %d pages", best.freelist, best.pgid)
	}
	return best, nil
}

type boltWalk struct {
	f        io.ReaderAt
	pageSize int64
	hwm      uint64
	seen     map[uint64]bool // at most hwm entries: each page is read once
}

// page reads page id with its overflow pages, each once.
func (w *boltWalk) page(id uint64, stack []uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d outside the database's %d pages (from %v)", id, w.hwm, stack)
	}
	head := make([]byte, boltPageHeader)
	if _, err := w.f.ReadAt(head, int64(id)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	over := uint64(le32(head[12:]))
	if le64(head) != id || over >= w.hwm-id {
		return nil, fmt.Errorf("page %d: says it is page %d with %d overflow pages, in a database of %d", id, le64(head), over, w.hwm)
	}
	for p := id; p <= id+over; p++ {
		if w.seen[p] {
			return nil, fmt.Errorf("page %d: reached twice (from %v)", p, stack)
		}
		w.seen[p] = true
	}
	buf := make([]byte, int64(over+1)*w.pageSize)
	if _, err := w.f.ReadAt(buf, int64(id)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

// freelist: bbolt reads its ids from the page (FreelistPageIds), the count
// in the header or, from 0xFFFF on, in the first id.
func (w *boltWalk) freelist(id uint64) error {
	p, err := w.page(id, nil)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if le16(p[8:]) != boltFreelist {
		return fmt.Errorf("freelist page %d is not a freelist", id)
	}
	first, count := uint64(0), uint64(le16(p[10:]))
	if count == 0xFFFF {
		first, count = 1, le64(p[boltPageHeader:])
	}
	if count > uint64(len(p)-boltPageHeader)/8-first {
		return fmt.Errorf("freelist page %d: %d ids do not fit in it", id, count)
	}
	return nil
}

// bucket walks the bucket whose root is page root, or inline (root 0:
// its page is inline, the bytes after its header).
func (w *boltWalk) bucket(root uint64, inline []byte, depth int) error {
	if depth > boltMaxDepth {
		return fmt.Errorf("buckets nested more than %d deep", boltMaxDepth)
	}
	if root == 0 {
		// bbolt inlines a bucket only under a quarter page and without
		// buckets of its own (bucket.go inlineable): inline pages are not
		// pages of the file, so these bounds are what keeps overlapping
		// inline values from multiplying the walk.
		switch {
		case len(inline) < boltPageHeader:
			return errors.New("inline bucket shorter than a page header")
		case int64(len(inline)) > w.pageSize/4:
			return fmt.Errorf("inline bucket of %d bytes, over a quarter page", len(inline))
		case le16(inline[8:]) != boltLeaf:
			return errors.New("inline bucket is not a leaf page")
		}
		return w.elements(inline, nil, -1)
	}
	return w.tree(root, []uint64{root}, depth)
}

// tree walks a bucket's B+tree from page id.
func (w *boltWalk) tree(id uint64, stack []uint64, depth int) error {
	if len(stack) > boltMaxDepth {
		return fmt.Errorf("a tree deeper than %d pages (%v)", boltMaxDepth, stack)
	}
	p, err := w.page(id, stack)
	if err != nil {
		return err
	}
	switch le16(p[8:]) {
	case boltBranch:
		children, err := branchChildren(p)
		if err != nil {
			return fmt.Errorf("page %d: %w", id, err)
		}
		for _, c := range children {
			if err := w.tree(c, append(stack, c), depth); err != nil {
				return err
			}
		}
		return nil
	case boltLeaf:
		if err := w.elements(p, stack, depth); err != nil {
			return fmt.Errorf("page %d: %w", id, err)
		}
		return nil
	}
	return fmt.Errorf("page %d: type %#x where a branch or a leaf belongs (from %v)", id, le16(p[8:]), stack)
}

// branchChildren are a branch page's child pages, its elements and keys
// inside it.
func branchChildren(p []byte) ([]uint64, error) {
	n := int(le16(p[10:]))
	if boltPageHeader+n*boltElement > len(p) {
		return nil, fmt.Errorf("%d elements do not fit in the page", n)
	}
	children := make([]uint64, n)
	for i := range n {
		e := boltPageHeader + i*boltElement
		if end := uint64(e) + uint64(le32(p[e:])) + uint64(le32(p[e+4:])); end > uint64(len(p)) {
			return nil, fmt.Errorf("element %d's key ends past the page", i)
		}
		children[i] = le64(p[e+8:])
	}
	return children, nil
}

// elements checks a leaf page's elements and walks the buckets it holds
// (depth -1: an inline bucket's page, which holds none).
func (w *boltWalk) elements(p []byte, stack []uint64, depth int) error {
	n := int(le16(p[10:]))
	if boltPageHeader+n*boltElement > len(p) {
		return fmt.Errorf("%d elements do not fit in the page", n)
	}
	for i := range n {
		e := boltPageHeader + i*boltElement
		key := uint64(e) + uint64(le32(p[e+4:]))
		end := key + uint64(le32(p[e+8:])) + uint64(le32(p[e+12:]))
		if end > uint64(len(p)) {
			return fmt.Errorf("element %d ends past the page", i)
		}
		if le32(p[e:])&boltBucketLeaf == 0 {
			continue
		}
		if depth < 0 {
			return fmt.Errorf("element %d: a bucket inside an inline bucket", i)
		}
		v := p[key+uint64(le32(p[e+8:])) : end]
		if len(v) < boltBucketHeader {
			return fmt.Errorf("element %d: a bucket shorter than its header", i)
		}
		if err := w.bucket(le64(v), v[boltBucketHeader:], depth+1); err != nil {
			return err
		}
	}
	return nil
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// checkBoltFile is checkBoltPages on the file at path, the database its
// first size bytes.
func checkBoltFile(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkBoltPages(f, size)
}
