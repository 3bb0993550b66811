package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/inventory"
)

// What the parent encodes the child decodes; the child refuses keys a
// flash never writes (0x09 holds encryption settings) and oversize values.
func TestCardMetaEncoding(t *testing.T) {
	m := &CardMeta{Node: "worker-1", Address: "127.0.0.22/8", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte("hostnames: []")}, {Key: meta.UserReserved3, Value: []byte(`{"format":"talosflash/v1"}`)}}}
	got, err := DecodeCardMeta(m.Encode())
	if err != nil || got.Node != m.Node || got.Address != m.Address || len(got.Tags) != 2 || !bytes.Equal(got.Tags[0].Value, m.Tags[0].Value) || got.Tags[1].Key != meta.UserReserved3 {
		t.Fatalf("%+v %v", got, err)
	}
	bad := &CardMeta{Node: "x", Tags: []meta.Tag{{Key: meta.StateEncryptionConfig, Value: []byte("x")}}}
	if _, err := DecodeCardMeta(bad.Encode()); err == nil || !strings.Contains(err.Error(), "0x09") {
		t.Fatalf("0x09 accepted: %v", err)
	}
	big := &CardMeta{Node: "x", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: make([]byte, 300<<10)}}}
	if _, err := DecodeCardMeta(big.Encode()); err == nil {
		t.Fatal("oversize accepted")
	}
	if _, err := DecodeCardMeta("!!"); err == nil {
		t.Fatal("garbage accepted")
	}
}

// The head check refuses an image without META, and values too big for
// the store, before any card is opened.
func TestCheckHeadRefuses(t *testing.T) {
	job := Job{Meta: []*CardMeta{{Node: "worker-1", Tags: []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte("x")}}}}}
	check := job.checkHead(&group{cards: []int{0}})
	if err := check(make([]byte, meta.HeadSize), -1, nil); !errors.Is(err, ErrNoNodeMeta) {
		t.Fatalf("no GPT: %v", err)
	}
	if (&Job{}).checkHead(&group{cards: []int{0}}) != nil || job.checkHead(&group{cards: []int{1}}) != nil {
		t.Fatal("a job without META checks the head")
	}
}

// An image whose META already holds a value of its own under talosflash's
// record key keeps it: the card is written with the node's network config
// only, and the user is told, once, as a status line and in the card's
// notes (where the front ends show them), without the device named twice.
func TestFlashKeepsTheImagesOwnRecordValueAndSaysSo(t *testing.T) {
	dir := t.TempDir()
	raw, err := imagetest.TalosRaw(64<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "metal-arm64.raw")
	if err := os.WriteFile(img, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	own := []byte("the image's own 0x0e")
	if _, err := meta.WriteTagsPath(img, []meta.Tag{{Key: inventory.RecordKey, Value: own}}); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.img")
	network := []byte("addresses: []")
	var status []string
	job := Job{Image: FromFile(img), Devices: []string{card}, Safety: devices.Options{CreateFile: true},
		Meta: []*CardMeta{{Node: "worker-1", Address: "127.0.0.22/8", Tags: []meta.Tag{
			{Key: meta.MetalNetworkPlatformConfig, Value: network},
			{Key: inventory.RecordKey, Value: []byte(`{"format":"talosflash/v1"}`)},
		}}},
		Status: func(m string) { status = append(status, m) }}
	out, err := Flash(context.Background(), job)
	if err != nil || !out.Cards[0].OK() {
		t.Fatalf("%+v %v", out, err)
	}
	got, err := meta.ReadStorePath(card)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.ADV.Get(inventory.RecordKey); !bytes.Equal(v, own) {
		t.Fatalf("0x0e is %q, want the image's own", v)
	}
	if v, _ := got.ADV.Get(meta.MetalNetworkPlatformConfig); !bytes.Equal(v, network) {
		t.Fatalf("0x0a is %q", v)
	}
	const note = "META 0x0e holds the image's own value: kept, talosflash's record left out"
	if !slices.Equal(out.Notes(), []string{note}) || !slices.Contains(status, card+": "+note) {
		t.Fatalf("notes %q, status %q", out.Notes(), status)
	}
}
