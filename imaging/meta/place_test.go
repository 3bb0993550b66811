package meta

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

func layoutImage(t testing.TB, l imagetest.Layout) []byte {
	t.Helper()

	raw, err := l.Raw(5)
	if err != nil {
		t.Fatal(err)
	}

	return raw
}

// Every hostile layout is refused from the image's head alone (size known
// or not), and by the write onto a card holding it, which is left byte for
// byte as it was.
func TestHostileLayoutsRefused(t *testing.T) {
	for _, l := range imagetest.HostileMETA() {
		t.Run(l.Name, func(t *testing.T) {
			raw := layoutImage(t, l)

			for _, size := range []int64{int64(len(raw)), -1} {
				if _, err := CheckHead(raw[:HeadSize], size); !Refused(err) || !strings.Contains(err.Error(), l.Why) {
					t.Errorf("CheckHead (size %d): %v, want a refusal mentioning %q", size, err, l.Why)
				}
			}

			// On a card twice the image's size, as cards are larger than
			// images: the table is read with the card's LBAs.
			for _, card := range [][]byte{append(bytes.Clone(raw), make([]byte, len(raw))...)} {
				path := filepath.Join(t.TempDir(), "card.img")
				if err := os.WriteFile(path, card, 0o600); err != nil {
					t.Fatal(err)
				}

				if _, err := WriteTagsPathWithin(path, int64(len(raw)), []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}); !Refused(err) {
					t.Errorf("WriteTagsPathWithin (card %d bytes): %v, want a refusal", len(card), err)
				}

				if !bytes.Equal(card, fileBytes(t, path)) {
					t.Errorf("the card (%d bytes) changed although refused", len(card))
				}
			}
		})
	}
}

// The same layout with META where Talos puts it passes, head and card.
func TestGoodLayoutAccepted(t *testing.T) {
	raw := layoutImage(t, imagetest.GoodMETA())

	if p, err := CheckHead(raw[:HeadSize], int64(len(raw))); err != nil || p.FirstLBA != 4096 {
		t.Fatalf("%+v %v", p, err)
	}

	path := filepath.Join(t.TempDir(), "card.img")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := WriteTagsPath(path, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}); err != nil {
		t.Fatal(err)
	}
}

// A card flashed with an image that ends before its META (a size-less
// stream whose table names a larger disk) is refused: the ADV would land
// outside the image, as would the table's usable LBAs.
func TestMETAPastTheImagesEndRefused(t *testing.T) {
	path, offs := testkit.Disk(t, "card.img", testkit.CardSize, imagetest.TalosParts())
	before := fileBytes(t, path)

	_, err := WriteTagsPathWithin(path, offs[metaIdx]+512<<10, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}})
	if !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "past the image's end") {
		t.Fatalf("err = %v", err)
	}

	if !bytes.Equal(before, fileBytes(t, path)) {
		t.Fatal("the card changed although refused")
	}

	if _, err := WriteTagsPathWithin(path, 16<<20, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}); err != nil {
		t.Fatalf("the whole image: %v", err)
	}
}

// lowMETA is a layout whose META store lies in the head a flash looks at
// before any card is touched (LBA 34, right after the primary table).
func lowMETA() imagetest.Layout {
	return imagetest.Layout{Name: "META at LBA 34", Entries: []imagetest.Entry{{Name: "META", First: 34, Last: 2081}, {Name: "EFI", First: 2082, Last: 6143}, {Name: "EPHEMERAL", First: 6144, Last: 16350}}, FirstUsable: 34, LastUsable: 16350}
}

// A store in the head is checked from the head: foreign data refused, the
// node's values checked next to the image's own tags; a blank one passes.
func TestCheckHeadReadsAStoreInTheHead(t *testing.T) {
	const headSize = 2 << 20 // imaging.HeadSize

	raw := layoutImage(t, lowMETA())
	tags := []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}

	if _, err := CheckHeadFor(raw[:headSize], int64(len(raw)), tags); err != nil {
		t.Fatalf("blank store: %v", err)
	}

	foreign := bytes.Clone(raw)
	copy(foreign[34*512:], "an ext4 superblock, say")
	if _, err := CheckHeadFor(foreign[:headSize], -1, tags); !errors.Is(err, ErrForeign) {
		t.Fatalf("foreign store: %v", err)
	}

	// The image's own tags take most of the store: the node's no longer fit.
	full := bytes.Clone(raw)
	own := &ADV{}
	if err := own.Set(UserReserved1, make([]byte, CopySize-40-20-8-100)); err != nil {
		t.Fatal(err)
	}
	c, err := own.Copy()
	if err != nil {
		t.Fatal(err)
	}
	copy(full[34*512:], c)
	copy(full[34*512+CopySize:], c)
	if _, err := CheckHeadFor(full[:headSize], int64(len(full)), tags); err != nil {
		t.Fatalf("small tags next to the image's: %v", err)
	}
	if _, err := CheckHeadFor(full[:headSize], int64(len(full)), []Tag{{Key: MetalNetworkPlatformConfig, Value: make([]byte, 200)}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("tags that do not fit next to the image's: %v", err)
	}
}

// withOwnTags is raw with a valid store at off whose own tag (0x0c) leaves
// 100 bytes for others.
func withOwnTags(t testing.TB, raw []byte, off int64) []byte {
	t.Helper()

	full := bytes.Clone(raw)
	own := &ADV{}
	if err := own.Set(UserReserved1, make([]byte, CopySize-40-20-8-100)); err != nil {
		t.Fatal(err)
	}
	b, err := own.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(full[off:], b)

	return full
}

// A store beyond the head is read through the image's ReaderAt (a local
// file) and gets the check the card's write makes, with the same outcome:
// foreign data refused, the node's values checked next to the image's own
// tags, a blank store passing. Without a ReaderAt (a stream) its content
// is left to the card; an image ending inside the store is refused.
func TestImageStoreBeyondTheHead(t *testing.T) {
	const headSize = 2 << 20 // imaging.HeadSize

	raw := layoutImage(t, imagetest.GoodMETA())
	off := int64(4096 * 512)
	small := []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}
	big := []Tag{{Key: MetalNetworkPlatformConfig, Value: make([]byte, 200)}}
	foreign := bytes.Clone(raw)
	copy(foreign[off:], "an ext4 superblock, say")
	full := withOwnTags(t, raw, off)

	for _, c := range []struct {
		name  string
		image []byte
		tags  []Tag
		want  error
	}{
		{"blank", raw, small, nil},
		{"foreign", foreign, small, ErrForeign},
		{"room next to its own tags", full, small, nil},
		{"no room next to its own tags", full, big, ErrTooLarge},
	} {
		s, err := ImageStore(c.image[:headSize], int64(len(c.image)), bytes.NewReader(c.image))
		if err != nil || s.ADV == nil {
			t.Fatalf("%s: %+v %v", c.name, s, err)
		}
		if err := CheckStore(s, c.tags); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		// The same outcome as on a card holding the image.
		card := filepath.Join(t.TempDir(), "card.img")
		if err := os.WriteFile(card, c.image, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteTagsPathWithin(card, int64(len(c.image)), c.tags); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: on the card: %v, want %v", c.name, err, c.want)
		}
	}

	if s, err := ImageStore(foreign[:headSize], -1, nil); err != nil || s.ADV != nil || s.Partition.Offset != off {
		t.Fatalf("a stream: %+v %v", s, err)
	}
	if _, err := CheckHeadFor(foreign[:headSize], int64(len(foreign)), small); err != nil {
		t.Fatalf("CheckHeadFor without the store's bytes: %v", err)
	}
	cut := raw[:off+Size-1]
	if _, err := ImageStore(raw[:headSize], -1, bytes.NewReader(cut)); !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "inside its META store") {
		t.Fatalf("an image ending inside its store: %v", err)
	}
}
