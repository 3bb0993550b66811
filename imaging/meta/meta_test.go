package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// --- an independent reader/writer, from the format description only ---

type indepTag struct {
	key uint32
	val []byte
}

// indepCopy checks one 256 KiB copy and returns its tags in disk order.
func indepCopy(c []byte) ([]indepTag, bool) {
	if len(c) != 256*1024 || binary.BigEndian.Uint32(c[0:4]) != 0x5a4b3c2d || binary.BigEndian.Uint32(c[len(c)-4:]) != 0xa5b4c3d2 {
		return nil, false
	}

	z := append([]byte(nil), c...)
	stored := append([]byte(nil), z[len(z)-36:len(z)-4]...)
	for i := len(z) - 36; i < len(z)-4; i++ {
		z[i] = 0
	}

	if h := sha256.Sum256(z); !bytes.Equal(h[:], stored) {
		return nil, false
	}

	var tags []indepTag
	for p := 4; p+8 <= len(c)-36; {
		k := binary.BigEndian.Uint32(c[p:])
		if k == 0 {
			break
		}

		n := int(binary.BigEndian.Uint32(c[p+4:]))
		if p+8+n > len(c)-36 {
			return nil, false
		}

		tags = append(tags, indepTag{k, c[p+8 : p+8+n]})
		p += 8 + n
	}

	return tags, true
}

func indepWrite(tags []indepTag) []byte {
	c := make([]byte, 256*1024)
	binary.BigEndian.PutUint32(c, 0x5a4b3c2d)
	p := 4
	for _, t := range tags {
		binary.BigEndian.PutUint32(c[p:], t.key)
		binary.BigEndian.PutUint32(c[p+4:], uint32(len(t.val)))
		copy(c[p+8:], t.val)
		p += 8 + len(t.val)
	}
	binary.BigEndian.PutUint32(c[len(c)-4:], 0xa5b4c3d2)
	h := sha256.Sum256(c)
	copy(c[len(c)-36:], h[:])

	return c
}

func tagMap(tags []indepTag) map[uint32]string {
	m := map[uint32]string{}
	for _, t := range tags {
		m[t.key] = string(t.val)
	}

	return m
}

// --- helpers ---

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	return b
}

const metaIdx = 2 // in imagetest.TalosParts

func TestWriteBlankMETA(t *testing.T) {
	path, offs := testkit.Disk(t, "card.img", testkit.CardSize, imagetest.TalosParts())
	before := fileBytes(t, path)
	value := []byte("hostnames:\n  - hostname: worker-1\n    layer: platform\n")

	w, err := WriteTagPath(path, MetalNetworkPlatformConfig, value)
	if err != nil {
		t.Fatal(err)
	}

	if w.Replaced || len(w.Kept) != 0 || w.Partition.Offset != offs[metaIdx] {
		t.Fatalf("written %+v", w)
	}

	after := fileBytes(t, path)
	off := offs[metaIdx]

	for i, name := range []string{"copy 1", "copy 2"} {
		tags, ok := indepCopy(after[off+int64(i)*256<<10 : off+int64(i+1)*256<<10])
		if !ok {
			t.Fatalf("%s invalid for the independent reader", name)
		}

		if len(tags) != 1 || tags[0].key != 0x0a || !bytes.Equal(tags[0].val, value) {
			t.Fatalf("%s tags %v", name, tags)
		}
	}

	// Nothing but the ADV changed: the rest of META (the syslinux ADV at
	// its end) and every other byte of the disk are the image's.
	if !bytes.Equal(before[:off], after[:off]) || !bytes.Equal(before[off+Size:], after[off+Size:]) {
		t.Fatal("bytes outside the META ADV changed")
	}
}

func TestExistingTagsKept(t *testing.T) {
	c := indepWrite([]indepTag{
		{0x0b, []byte("code-123")},
		{0x0a, []byte("old: network")},
		{0x0c, []byte(`{"machineLabels":{"rack":"a"}}`)},
	})
	parts := imagetest.TalosParts()
	parts[metaIdx].Data = append(append([]byte{}, c...), c...)
	path, offs := testkit.Disk(t, "card.img", testkit.CardSize, parts)

	w, err := WriteTagPath(path, MetalNetworkPlatformConfig, []byte("new: network"))
	if err != nil {
		t.Fatal(err)
	}

	if !w.Replaced || len(w.Kept) != 2 {
		t.Fatalf("written %+v", w)
	}

	after := fileBytes(t, path)
	for i := range 2 {
		tags, ok := indepCopy(after[offs[metaIdx]+int64(i)*CopySize:][:CopySize])
		if !ok {
			t.Fatalf("copy %d invalid", i+1)
		}

		got := tagMap(tags)
		want := map[uint32]string{0x0b: "code-123", 0x0a: "new: network", 0x0c: `{"machineLabels":{"rack":"a"}}`}
		if len(got) != len(want) {
			t.Fatalf("copy %d: %v", i+1, got)
		}

		for k, v := range want {
			if got[k] != v {
				t.Fatalf("copy %d key %#x = %q, want %q", i+1, k, got[k], v)
			}
		}
	}
}

func TestCorruptedCopyFallsBack(t *testing.T) {
	good := indepWrite([]indepTag{{0x0a, []byte("from copy")}, {0x0f, []byte("uuid")}})

	for _, bad := range []int{1, 2} {
		t.Run(map[int]string{1: "copy1", 2: "copy2"}[bad], func(t *testing.T) {
			broken := append([]byte{}, good...)
			broken[100] ^= 0x01 // checksum no longer matches

			area := append(append([]byte{}, good...), good...)
			copy(area[(bad-1)*CopySize:], broken)

			a, st, err := Parse(area)
			if err != nil {
				t.Fatal(err)
			}

			if st.Used != 3-bad || (bad == 1) != (st.Copy1 != nil) || (bad == 2) != (st.Copy2 != nil) {
				t.Fatalf("status %+v", st)
			}

			if v, ok := a.Get(0x0a); !ok || string(v) != "from copy" {
				t.Fatalf("0x0a = %q %v", v, ok)
			}

			// Writing over it keeps the good copy's tags and repairs both.
			parts := imagetest.TalosParts()
			parts[metaIdx].Data = area
			path, offs := testkit.Disk(t, "card.img", testkit.CardSize, parts)

			if _, err := WriteTagPath(path, MetalNetworkPlatformConfig, []byte("new")); err != nil {
				t.Fatal(err)
			}

			after := fileBytes(t, path)
			for i := range 2 {
				tags, ok := indepCopy(after[offs[metaIdx]+int64(i)*CopySize:][:CopySize])
				if !ok || tagMap(tags)[0x0f] != "uuid" || tagMap(tags)[0x0a] != "new" {
					t.Fatalf("copy %d after write: ok %v %v", i+1, ok, tagMap(tags))
				}
			}
		})
	}
}

func TestParseBlankAndForeign(t *testing.T) {
	a, st, err := Parse(make([]byte, Size))
	if err != nil || st.Used != 0 || !st.Blank || len(a.Tags()) != 0 {
		t.Fatalf("blank: %v %+v", err, st)
	}

	junk := bytes.Repeat([]byte("not an adv "), Size/11+1)[:Size]
	if _, st, _ := Parse(junk); st.Used != 0 || st.Blank {
		t.Fatalf("junk: %+v", st)
	}
}

// Every refusal happens before a byte is written: the image is unchanged.
func TestRefusedBeforeWriting(t *testing.T) {
	dir := t.TempDir()

	mbr := make([]byte, 4<<20)
	mbr[510], mbr[511] = 0x55, 0xAA
	mbrPath := filepath.Join(dir, "mbr.img")
	if err := os.WriteFile(mbrPath, mbr, 0o600); err != nil {
		t.Fatal(err)
	}

	noMeta, _ := testkit.Disk(t, "card.img", testkit.CardSize, []imagetest.Part{{Name: "EFI", Size: 1 << 20}, {Name: "STATE", Size: 1 << 20}})
	small, _ := testkit.Disk(t, "card.img", testkit.CardSize, []imagetest.Part{{Name: "EFI", Size: 1 << 20}, {Name: "META", Size: 512 << 10}})

	foreignParts := imagetest.TalosParts()
	foreignParts[metaIdx].Data = []byte("an ext4 superblock, say")
	foreign, _ := testkit.Disk(t, "card.img", testkit.CardSize, foreignParts)

	cases := []struct {
		path string
		err  error
		msg  string
	}{
		{mbrPath, ErrNoGPT, "GPT"},
		{noMeta, ErrNoMETA, `"EFI", "STATE"`},
		{small, ErrTooSmall, "524288 bytes"},
		{foreign, ErrForeign, "not a Talos ADV"},
	}

	for _, c := range cases {
		before := fileBytes(t, c.path)

		_, err := WriteTagPath(c.path, MetalNetworkPlatformConfig, []byte("x: y"))
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want %v mentioning %q", filepath.Base(c.path), err, c.err, c.msg)
		}

		if !bytes.Equal(before, fileBytes(t, c.path)) {
			t.Errorf("%s: changed although refused", filepath.Base(c.path))
		}
	}
}

func TestTooLarge(t *testing.T) {
	a := &ADV{}
	if err := a.Set(0x0a, make([]byte, CopySize)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}

	if err := a.Set(0x0a, make([]byte, maxTagBytes-8)); err != nil {
		t.Fatalf("largest value: %v", err)
	}

	if _, err := a.Copy(); err != nil {
		t.Fatal(err)
	}

	if err := a.Set(0, []byte("x")); err == nil {
		t.Fatal("key 0 accepted")
	}
}

// A real block device: a loop device over the image, written by path.
func TestWriteLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop device")
	}

	path, offs := testkit.Disk(t, "card.img", testkit.CardSize, imagetest.TalosParts())

	out, err := exec.Command("losetup", "-f", "--show", path).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}

	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })

	if _, err := WriteTagPath(dev, MetalNetworkPlatformConfig, []byte("on: the loop")); err != nil {
		t.Fatal(err)
	}

	card, err := ReadStorePath(dev)
	if err != nil {
		t.Fatal(err)
	}

	if v, _ := card.ADV.Get(0x0a); string(v) != "on: the loop" {
		t.Fatalf("device read: %q", v)
	}

	// And the backing file holds it (the write went through to the medium).
	after := fileBytes(t, path)
	tags, ok := indepCopy(after[offs[metaIdx]:][:CopySize])
	if !ok || tagMap(tags)[0x0a] != "on: the loop" {
		t.Fatalf("backing file: ok %v %v", ok, tagMap(tags))
	}
}

func FuzzParse(f *testing.F) {
	f.Add(indepWrite([]indepTag{{0x0a, []byte("a: b")}})[:64], uint16(0))
	f.Add([]byte{0x5a, 0x4b, 0x3c, 0x2d, 0, 0, 0, 0x0a, 0xff, 0xff, 0xff, 0xff}, uint16(7))

	f.Fuzz(func(t *testing.T, head []byte, extra uint16) {
		// A copy with the fuzzed tag area and a valid checksum, so the
		// tag walk itself is exercised.
		c := make([]byte, CopySize)
		binary.BigEndian.PutUint32(c, magic1)
		copy(c[4:CopySize-36], head)
		binary.BigEndian.PutUint32(c[CopySize-4:], magic2)
		h := sha256.Sum256(c)
		copy(c[CopySize-36:], h[:])

		area := append(append([]byte{}, c...), make([]byte, CopySize)...)
		area[CopySize+int(extra)%CopySize] = 1

		a, _, err := Parse(area)
		if err != nil {
			t.Fatal(err)
		}

		// What parses re-serializes to the same tags.
		out, err := a.Copy()
		if err != nil {
			return // more than Talos would accept to write
		}

		b, st, _ := Parse(append(out, out...))
		if st.Used != 1 || len(b.Tags()) != len(a.Tags()) {
			t.Fatalf("round trip: %+v, %d vs %d tags", st, len(b.Tags()), len(a.Tags()))
		}

		for _, tg := range a.Tags() {
			if v, ok := b.Get(tg.Key); !ok || !bytes.Equal(v, tg.Value) {
				t.Fatalf("key %#x lost", tg.Key)
			}
		}
	})
}

func TestCheckHead(t *testing.T) {
	good, offs := testkit.Disk(t, "card.img", testkit.CardSize, imagetest.TalosParts())
	noMeta, _ := testkit.Disk(t, "card.img", testkit.CardSize, []imagetest.Part{{Name: "EFI", Size: 1 << 20}})
	small, _ := testkit.Disk(t, "card.img", testkit.CardSize, []imagetest.Part{{Name: "META", Size: 512 << 10}})

	head := func(path string) []byte { return fileBytes(t, path)[:HeadSize] }

	p, err := CheckHead(head(good), 16<<20)
	if err != nil || p.Offset != offs[metaIdx] || p.Size != 1<<20 {
		t.Fatalf("good: %+v %v", p, err)
	}

	if _, err := CheckHead(head(noMeta), 16<<20); !errors.Is(err, ErrNoMETA) {
		t.Fatalf("no META: %v", err)
	}

	if _, err := CheckHead(head(small), 16<<20); !errors.Is(err, ErrTooSmall) {
		t.Fatalf("small: %v", err)
	}

	if _, err := CheckHead(make([]byte, HeadSize), 16<<20); !errors.Is(err, ErrNoGPT) {
		t.Fatalf("zeros: %v", err)
	}

	// A table whose META lies beyond the image's end.
	if _, err := CheckHead(head(good), 4<<20); err == nil {
		t.Fatal("META past the end accepted")
	}

	// imagetest's generated images: the primary is found from the head alone.
	raw, err := imagetest.Raw(64<<20, 3)
	if err != nil {
		t.Fatal(err)
	}

	if p, err := CheckHead(raw[:HeadSize], int64(len(raw))); err != nil || p.Name != "META" {
		t.Fatalf("imagetest.Raw: %+v %v", p, err)
	}
}

// failingDisk cuts the write stream after limit bytes (a card pulled out).
type failingDisk struct {
	*os.File
	limit int
}

func (d *failingDisk) WriteAt(b []byte, off int64) (int, error) {
	if len(b) > d.limit {
		n, _ := d.File.WriteAt(b[:d.limit], off)
		d.limit = 0

		return n, errors.New("card removed")
	}

	d.limit -= len(b)

	return d.File.WriteAt(b, off)
}

// Copy by copy: a write cut anywhere leaves one valid copy, the old tags
// or the new ones, never neither.
func TestInterruptedWriteLeavesOneCopy(t *testing.T) {
	old := indepWrite([]indepTag{{0x0a, []byte("old")}})

	for _, cut := range []int{0, 1000, CopySize - 1, CopySize, CopySize + 5000, 2*CopySize - 1} {
		parts := imagetest.TalosParts()
		parts[metaIdx].Data = append(append([]byte{}, old...), old...)
		path, _ := testkit.Disk(t, "card.img", testkit.CardSize, parts)

		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}

		_, err = WriteTag(&failingDisk{f, cut}, 16<<20, 0x0a, []byte("new"))
		f.Close()

		if err == nil {
			t.Fatalf("cut at %d: no error", cut)
		}

		card, err := ReadStorePath(path)
		if err != nil || card.Status.Used == 0 {
			t.Fatalf("cut at %d: no valid copy left: %v %+v", cut, err, card.Status)
		}

		// Before copy 1 is complete: the old tags (or, when only bytes
		// equal to the old ones were missing, the new); after: the new.
		v, _ := card.ADV.Get(0x0a)
		if string(v) != "new" && (cut >= CopySize || string(v) != "old") {
			t.Fatalf("cut at %d: 0x0a = %q", cut, v)
		}
	}
}

// imagetest.TalosRaw (for flash tests with an inventory) takes a node's
// META: a correct GPT both ways, a blank 1 MiB META.
func TestTalosRawFixture(t *testing.T) {
	raw, err := imagetest.TalosRaw(16<<20, 5)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := CheckHead(raw[:HeadSize], int64(len(raw))); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "talos.raw")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	card, err := ReadStorePath(path)
	if err != nil || !card.Table.Primary || !card.Table.Backup || !card.Status.Blank {
		t.Fatalf("%+v %v", card, err)
	}

	if _, err := WriteTagPath(path, MetalNetworkPlatformConfig, []byte("hostnames: []")); err != nil {
		t.Fatal(err)
	}
}
