package meta

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// placeSize is the hostile images' size: 16384 sectors, usable 34..16350.
const placeSize = 8 << 20

// HostileLayout is one GPT layout whose META a flash must refuse.
type hostileLayout struct {
	name        string
	ents        []imagetest.Entry
	first, last uint64 // the headers' usable LBAs
	err         error
	msg         string
}

func hostileLayouts() []hostileLayout {
	efi := imagetest.Entry{Name: "EFI", First: 2048, Last: 4095}
	eph := imagetest.Entry{Name: "EPHEMERAL", First: 6144, Last: 16350}
	meta := func(first, last uint64) imagetest.Entry {
		return imagetest.Entry{Name: "META", First: first, Last: last}
	}

	return []hostileLayout{
		{"META over the primary entry array", []imagetest.Entry{meta(3, 1028), efi, eph}, 34, 16350, ErrPlace, "usable LBAs"},
		{"META over the primary entry array, usable from LBA 3", []imagetest.Entry{meta(3, 1028), efi, eph}, 3, 16350, ErrPlace, "GPT entry array"},
		{"META over the primary header", []imagetest.Entry{meta(1, 2048), efi, eph}, 1, 16350, ErrPlace, "GPT header"},
		{"META at LBA 0", []imagetest.Entry{meta(0, 2047), efi, eph}, 0, 16350, ErrPlace, "LBA 0"},
		{"META before FirstUsableLBA", []imagetest.Entry{meta(40, 2047), efi, eph}, 2048, 16350, ErrPlace, "usable LBAs"},
		{"META after LastUsableLBA", []imagetest.Entry{efi, meta(14000, 16383)}, 34, 16350, ErrPlace, "usable LBAs"},
		{"META over the backup array and header", []imagetest.Entry{efi, meta(14000, 16383)}, 34, 16383, ErrPlace, "GPT"},
		{"META over EPHEMERAL", []imagetest.Entry{efi, meta(4096, 6143), {Name: "EPHEMERAL", First: 6000, Last: 16350}}, 34, 16350, ErrPlace, `"EPHEMERAL"`},
		{"META inside EFI", []imagetest.Entry{{Name: "EFI", First: 2048, Last: 8191}, meta(4096, 6143), eph}, 34, 16350, ErrPlace, `"EFI"`},
		{"two META partitions", []imagetest.Entry{efi, meta(4096, 6143), meta(8192, 10239)}, 34, 16350, ErrPlace, "2 partitions labelled META"},
		{"META too small", []imagetest.Entry{efi, meta(4096, 4096+1024), eph}, 34, 16350, ErrTooSmall, "bytes"},
		{"no META", []imagetest.Entry{efi, eph}, 34, 16350, ErrNoMETA, "EFI EPHEMERAL"},
	}
}

func hostileImage(t testing.TB, l hostileLayout) []byte {
	t.Helper()

	raw, err := imagetest.GPTRaw(placeSize, 5, l.ents, l.first, l.last)
	if err != nil {
		t.Fatal(err)
	}

	return raw
}

// Every hostile layout is refused from the image's head alone, and by the
// write onto a card holding it, which is left byte for byte as it was.
func TestHostileLayoutsRefused(t *testing.T) {
	for _, l := range hostileLayouts() {
		t.Run(l.name, func(t *testing.T) {
			raw := hostileImage(t, l)

			for _, size := range []int64{int64(len(raw)), -1} {
				if _, err := CheckHead(raw[:HeadSize], size); !errors.Is(err, l.err) || !strings.Contains(err.Error(), l.msg) {
					t.Errorf("CheckHead (size %d): %v, want %v mentioning %q", size, err, l.err, l.msg)
				}
			}

			path := filepath.Join(t.TempDir(), "card.img")
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}

			if _, err := WriteTagsPath(path, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}); !errors.Is(err, l.err) || !Refused(err) {
				t.Errorf("WriteTagsPath: %v, want %v", err, l.err)
			}

			if !bytes.Equal(raw, fileBytes(t, path)) {
				t.Error("the card changed although refused")
			}
		})
	}
}

// The same layout with META where Talos puts it passes, head and card.
func TestGoodLayoutAccepted(t *testing.T) {
	l := hostileLayout{ents: []imagetest.Entry{{Name: "EFI", First: 2048, Last: 4095}, {Name: "META", First: 4096, Last: 6143}, {Name: "EPHEMERAL", First: 6144, Last: 16350}}, first: 34, last: 16350}
	raw := hostileImage(t, l)

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
// outside the image.
func TestMETAPastTheImagesEndRefused(t *testing.T) {
	path, offs := disk(t, imagetest.TalosParts())
	before := fileBytes(t, path)

	_, err := WriteTagsPathWithin(path, offs[metaIdx]+512<<10, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}})
	if !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "past the image's end") {
		t.Fatalf("err = %v", err)
	}

	if !bytes.Equal(before, fileBytes(t, path)) {
		t.Fatal("the card changed although refused")
	}

	if _, err := WriteTagsPathWithin(path, offs[metaIdx]+1<<20, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}); err != nil {
		t.Fatalf("META ending at the image's end: %v", err)
	}
}
