package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
)

// zstdSizeless compresses raw as a streaming writer does: no content size
// in the frame header, so the flash learns the image's size only at its end.
func zstdSizeless(t testing.TB, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(out.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("the frame names its size (%v): %+v", err, h)
	}
	return out.Bytes()
}

func nodeMeta() *CardMeta {
	return &CardMeta{Node: "worker-1", Address: "127.0.0.22/8", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte("addresses: []")}}}
}

// metaFlash flashes image (a file named name) onto a card file that holds
// card, with the node's values.
func metaFlash(t testing.TB, dir, name string, image, card []byte) (*Outcome, string, error) {
	t.Helper()
	img := filepath.Join(dir, name)
	if err := os.WriteFile(img, image, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "card.img")
	if err := os.WriteFile(target, card, 0o600); err != nil {
		t.Fatal(err)
	}
	job := Job{Image: FromFile(img), Devices: []string{target}, Safety: devices.Options{CreateFile: true}, Meta: []*CardMeta{nodeMeta()}}
	out, err := Flash(context.Background(), job)
	return out, target, err
}

// A card's bytes before a refused flash: a pattern no image holds.
func cardBefore() []byte {
	return bytes.Repeat([]byte("old card "), (imagetest.HostileSize+4096)/9+1)[:imagetest.HostileSize+4096]
}

// Every hostile META layout, raw or a size-less zstd stream, is refused
// before the card is opened: ErrNoNodeMeta (exit 9), the card's bytes as
// they were.
func TestFlashRefusesHostileMETABeforeWriting(t *testing.T) {
	for _, l := range imagetest.HostileMETA() {
		t.Run(l.Name, func(t *testing.T) {
			raw, err := l.Raw(7)
			if err != nil {
				t.Fatal(err)
			}
			for _, img := range []struct {
				name string
				data []byte
			}{{"metal-arm64.raw", raw}, {"metal-arm64.raw.zst", zstdSizeless(t, raw)}} {
				before := cardBefore()
				_, target, err := metaFlash(t, t.TempDir(), img.name, img.data, before)
				if !errors.Is(err, ErrNoNodeMeta) || !strings.Contains(err.Error(), l.Why) || !strings.Contains(err.Error(), "no card was touched") {
					t.Errorf("%s: %v, want ErrNoNodeMeta mentioning %q", img.name, err, l.Why)
				}
				if got, _ := os.ReadFile(target); !bytes.Equal(got, before) {
					t.Errorf("%s: the card changed although refused", img.name)
				}
			}
		})
	}
}

// Foreign data in the image's META, beyond the head the flash looks at
// first, is found before any card is touched when the image is a file
// (metaprecheck_test.go): the card keeps its bytes.
func TestFlashForeignMETAIsAnImageRefusal(t *testing.T) {
	before := cardBefore()
	out, target, err := metaFlash(t, t.TempDir(), "metal-arm64.raw", foreignMETA(t), before)
	if !errors.Is(err, ErrNoNodeMeta) || !errors.Is(err, meta.ErrForeign) || !strings.Contains(err.Error(), "no card was touched") {
		t.Fatalf("%+v %v", out, err)
	}
	if got, _ := os.ReadFile(target); !bytes.Equal(got, before) {
		t.Fatal("the card changed although refused")
	}
}

// The write onto the card is bounded by the image's decoded bytes: a
// size-less stream whose META lies past its end is refused, the card
// unchanged.
func TestWriteCardMetaBoundedByTheImage(t *testing.T) {
	raw, err := imagetest.GoodMETA().Raw(7)
	if err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(t.TempDir(), "card.img")
	if err := os.WriteFile(card, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	job := &Job{Safety: devices.Options{CreateFile: true}}
	if _, _, err := job.writeCardMeta(card, 4096*512+512<<10, nodeMeta(), false); !errors.Is(err, ErrNoNodeMeta) || !strings.Contains(err.Error(), "past the image's end") || !strings.Contains(err.Error(), streamMETANote) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := os.ReadFile(card); !bytes.Equal(got, raw) {
		t.Fatal("the card changed although refused")
	}
	if _, _, err := job.writeCardMeta(card, int64(len(raw)), nodeMeta(), false); err != nil {
		t.Fatal(err)
	}
}

// Foreign data in a META store that lies in the head the flash looks at
// first is refused before the card is opened (exit 9, the card's bytes
// unchanged), raw or size-less.
func TestFlashRefusesForeignMETAInTheHeadBeforeWriting(t *testing.T) {
	l := imagetest.Layout{Entries: []imagetest.Entry{{Name: "META", First: 34, Last: 2081}, {Name: "EFI", First: 2082, Last: 6143}, {Name: "EPHEMERAL", First: 6144, Last: 16350}}, FirstUsable: 34, LastUsable: 16350}
	raw, err := l.Raw(7)
	if err != nil {
		t.Fatal(err)
	}
	copy(raw[34*512:], "an ext4 superblock, say")
	for _, img := range []struct {
		name string
		data []byte
	}{{"metal-arm64.raw", raw}, {"metal-arm64.raw.zst", zstdSizeless(t, raw)}} {
		before := cardBefore()
		_, target, err := metaFlash(t, t.TempDir(), img.name, img.data, before)
		if !errors.Is(err, ErrNoNodeMeta) || !errors.Is(err, meta.ErrForeign) || !strings.Contains(err.Error(), "no card was touched") {
			t.Errorf("%s: %v", img.name, err)
		}
		if got, _ := os.ReadFile(target); !bytes.Equal(got, before) {
			t.Errorf("%s: the card changed although refused", img.name)
		}
	}
}
