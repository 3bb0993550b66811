package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
)

// metaContentImages are Talos-like images (META beyond the first 2 MiB, as
// in every Talos image) whose META store a node's values cannot go into:
// foreign data, or the image's own tags leaving no room.
func metaContentImages(t *testing.T) map[string][]byte {
	t.Helper()
	raw, err := imagetest.TalosRaw(imageSize, 13)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gpt.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tab.Find(meta.PartitionLabel)
	if p.Offset < 2<<20 {
		t.Fatalf("META at %d: inside the head", p.Offset)
	}
	foreign := bytes.Clone(raw)
	copy(foreign[p.Offset:], "an ext4 superblock, say")
	full := bytes.Clone(raw)
	own := &meta.ADV{}
	if err := own.Set(meta.UserReserved1, make([]byte, meta.CopySize-40-20-8-100)); err != nil {
		t.Fatal(err)
	}
	b, err := own.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(full[p.Offset:], b)
	return map[string][]byte{"foreign data": foreign, "no room": full}
}

// oldCard fills the loop device dev with a pattern no image holds, synced,
// and returns its hash and write count.
func oldCard(t *testing.T, dev string, size int64) (string, int64) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("old card "), int(size)/9)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return imagetest.FileSHA256(t, dev, size), imagetest.DeviceWrites(t, dev)
}

// An image file (--image .raw, .raw.xz, .raw.zst) whose META cannot take
// the node's values is refused before the card is opened: exit 9, the
// loop device's bytes as they were and not one write counted by the
// kernel.
func TestFlashInventoryMETAContentRefusedBeforeTheCard(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	size := int64(imageSize + 1<<20)
	dev := imagetest.LoopDevice(t, size, false)
	for what, raw := range metaContentImages(t) {
		x, err := imagetest.XZBytes(raw, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		z, err := imagetest.ZstdBytes(raw)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"metal-arm64.raw": raw, "metal-arm64.raw.xz": x, "metal-arm64.raw.zst": z} {
			img := testkit.WriteFile(t, t.TempDir(), name, data)
			sum, writes := oldCard(t, dev, size)
			code, _, stderr := cliRun(t, "--flash", "--inventory", inv, "--hostname", "worker-1", "--image", img, "--allow-unknown-image",
				"--device", dev, "--allow-loop", "--yes", "--factory", "http://"+testkit.ClosedAddr(t))
			if code != contract.ExitImage || !strings.Contains(stderr, "cannot carry the node's network config") || !strings.Contains(stderr, "no card was touched") {
				t.Fatalf("%s, %s: exit %d: %s", what, name, code, stderr)
			}
			if got := imagetest.FileSHA256(t, dev, size); got != sum {
				t.Fatalf("%s, %s: the card changed", what, name)
			}
			if w := imagetest.DeviceWrites(t, dev); w != writes {
				t.Fatalf("%s, %s: %d writes to the card", what, name, w-writes)
			}
		}
	}
}

// The factory's image: its first download is a stream (decoded as it
// arrives), whose META is known only on the card: exit 9 after the write,
// the card holding the plain image, the error saying why; flashed again
// from the cache, it is refused before the card is touched (no write).
func TestFlashInventoryMETAContentStreamThenCached(t *testing.T) {
	raw := metaContentImages(t)["foreign data"]
	z, err := imagetest.ZstdBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	srv := factorytest.New(t)
	id, err := factory.BuiltinProfiles()[1].SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	srv.AddImage(id, factory.BuiltinProfiles()[1].Version(), "metal-arm64.raw.zst", z)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	size := int64(imageSize + 1<<20)
	dev := imagetest.LoopDevice(t, size, false)
	args := []string{"--flash", "--inventory", inv, "--hostname", "worker-1", "--device", dev, "--allow-loop", "--yes",
		"--format", "zst", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}

	for _, first := range []struct {
		name  string
		extra []string
	}{{"--no-cache", []string{"--no-cache"}}, {"first download", nil}} {
		oldCard(t, dev, size)
		code, _, stderr := cliRun(t, append(args, first.extra...)...)
		if code != contract.ExitImage || !strings.Contains(stderr, "the card holds the plain image") ||
			!strings.Contains(stderr, "the image came as a stream") || !strings.Contains(stderr, "a cached or local image file is checked before any card is touched") {
			t.Fatalf("%s: exit %d: %s", first.name, code, stderr)
		}
		if got := imagetest.FileSHA256(t, dev, int64(len(raw))); got != imagetest.FileSHA256(t, testkit.WriteFile(t, t.TempDir(), "raw", raw), int64(len(raw))) {
			t.Fatalf("%s: the card does not hold the plain image", first.name)
		}
	}

	sum, writes := oldCard(t, dev, size)
	code, _, stderr := cliRun(t, args...)
	if code != contract.ExitImage || !strings.Contains(stderr, "no card was touched") || !strings.Contains(stderr, "using the cached image") {
		t.Fatalf("cached: exit %d: %s", code, stderr)
	}
	if imagetest.FileSHA256(t, dev, size) != sum || imagetest.DeviceWrites(t, dev) != writes {
		t.Fatal("cached: the card was written")
	}
}
