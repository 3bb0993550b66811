package plan

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
)

// FuzzMETAPlacement: a GPT with META anywhere (and another partition, and
// a second META, and any usable LBAs) flashed with a node's values either
// is refused before the card is opened (ErrNoNodeMeta, the card's bytes
// unchanged), or leaves a card that is the image byte for byte outside
// META's store, both GPT copies valid, and a valid META with the node's
// values.
func FuzzMETAPlacement(f *testing.F) {
	for _, l := range append(imagetest.HostileMETA(), imagetest.GoodMETA()) {
		e := append(l.Entries, imagetest.Entry{}, imagetest.Entry{})
		f.Add(uint16(e[0].First), uint16(e[0].Last), uint16(e[1].First), uint16(e[1].Last), e[2].Name == "META", uint16(e[2].First), uint16(e[2].Last), uint16(l.FirstUsable), uint16(l.LastUsable), false)
	}
	f.Add(uint16(4096), uint16(6143), uint16(2048), uint16(4095), false, uint16(6144), uint16(16350), uint16(34), uint16(16350), true)
	f.Fuzz(func(t *testing.T, metaFirst, metaLast, otherFirst, otherLast uint16, twoMETA bool, thirdFirst, thirdLast, firstUsable, lastUsable uint16, sizeless bool) {
		third := "EPHEMERAL"
		if twoMETA {
			third = "META"
		}
		ents := []imagetest.Entry{
			{Name: "META", First: uint64(metaFirst), Last: uint64(metaLast)},
			{Name: "EFI", First: uint64(otherFirst), Last: uint64(otherLast)},
			{Name: third, First: uint64(thirdFirst), Last: uint64(thirdLast)},
		}
		raw, err := imagetest.GPTRaw(imagetest.HostileSize, 9, ents, uint64(firstUsable), uint64(lastUsable))
		if err != nil {
			t.Fatal(err)
		}
		name, image := "metal-arm64.raw", raw
		if sizeless {
			name, image = "metal-arm64.raw.zst", zstdSizeless(t, raw)
		}
		before := cardBefore()
		_, target, err := metaFlash(t, t.TempDir(), name, image, before)
		card, rerr := os.ReadFile(target)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if !errors.Is(err, ErrNoNodeMeta) || !strings.Contains(err.Error(), "no card was touched") {
				t.Fatalf("not a refusal before writing: %v", err)
			}
			if !bytes.Equal(card, before) {
				t.Fatalf("refused (%v), but the card changed", err)
			}
			return
		}
		tab, err := gpt.Read(bytes.NewReader(card), int64(len(card)))
		if err != nil || !tab.Primary || !tab.Backup {
			t.Fatalf("the card's GPT after the flash: %+v %v", tab, err)
		}
		p, ok := tab.Find(meta.PartitionLabel)
		if !ok || len(card) != len(raw) {
			t.Fatalf("META %v, card %d bytes, image %d", ok, len(card), len(raw))
		}
		if !bytes.Equal(card[:p.Offset], raw[:p.Offset]) || !bytes.Equal(card[p.Offset+meta.Size:], raw[p.Offset+meta.Size:]) {
			t.Fatal("the card differs from the image outside META's store")
		}
		a, st, err := meta.Parse(card[p.Offset : p.Offset+meta.Size])
		if err != nil || st.Copy1 != nil || st.Copy2 != nil {
			t.Fatalf("META: %v %+v", err, st)
		}
		if v, _ := a.Get(meta.MetalNetworkPlatformConfig); !bytes.Equal(v, nodeMeta().Tags[0].Value) {
			t.Fatalf("META 0x0a is %q", v)
		}
	})
}
