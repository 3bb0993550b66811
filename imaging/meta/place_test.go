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

			path := filepath.Join(t.TempDir(), "card.img")
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}

			if _, err := WriteTagsPath(path, []Tag{{Key: MetalNetworkPlatformConfig, Value: []byte("x: y")}}); !Refused(err) || !strings.Contains(err.Error(), l.Why) {
				t.Errorf("WriteTagsPath: %v, want a refusal mentioning %q", err, l.Why)
			}

			if !bytes.Equal(raw, fileBytes(t, path)) {
				t.Error("the card changed although refused")
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
