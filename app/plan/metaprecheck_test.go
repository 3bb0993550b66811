package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
)

// goodMETAOffset is where GoodMETA's store lies: LBA 4096, the first byte
// past the head a flash looks at first (as in every Talos image, whose
// META lies after BOOT).
const goodMETAOffset = 4096 * 512

// foreignMETA is GoodMETA's image with foreign data in its META store.
func foreignMETA(t testing.TB) []byte {
	t.Helper()
	raw, err := imagetest.GoodMETA().Raw(7)
	if err != nil {
		t.Fatal(err)
	}
	copy(raw[goodMETAOffset:], "an ext4 superblock, say")
	return raw
}

// fullMETA is GoodMETA's image whose store holds a tag of its own (0x0c)
// that leaves 10 bytes: no room for the node's values.
func fullMETA(t testing.TB) []byte {
	t.Helper()
	raw, err := imagetest.GoodMETA().Raw(7)
	if err != nil {
		t.Fatal(err)
	}
	own := &meta.ADV{}
	if err := own.Set(meta.UserReserved1, make([]byte, meta.CopySize-40-20-8-10)); err != nil {
		t.Fatal(err)
	}
	b, err := own.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(raw[goodMETAOffset:], b)
	return raw
}

// metaImages are an image's file forms a flash reads at META's offset
// before any card is touched.
func metaImages(t testing.TB, raw []byte) map[string][]byte {
	t.Helper()
	x, err := imagetest.XZBytes(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	z, err := imagetest.ZstdBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"metal-arm64.raw": raw, "metal-arm64.raw.xz": x, "metal-arm64.raw.zst": z, "size-less.raw.zst": zstdSizeless(t, raw)}
}

// countingOpen opens file cards (created as needed) and counts the opens.
type countingOpen struct {
	mu     sync.Mutex
	opened []string
}

func (c *countingOpen) open(path string, size int64) (imaging.Target, error) {
	c.mu.Lock()
	c.opened = append(c.opened, path)
	c.mu.Unlock()
	return DeviceOpener(devices.Options{CreateFile: true})(path, size)
}

// The image's META content, read from an image file (raw, xz, zstd with
// or without its size) at META's offset beyond the head, is checked with
// the card's own store check before any card is opened: foreign data, or
// the image's own tags leaving no room for the node's, refuse the flash
// (ErrNoNodeMeta, exit 9), the card never opened and its bytes as they
// were.
func TestFlashMETAContentRefusedBeforeAnyCard(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  []byte
		want error
	}{{"foreign data", foreignMETA(t), meta.ErrForeign}, {"no room next to its own tags", fullMETA(t), meta.ErrTooLarge}} {
		for name, image := range metaImages(t, c.raw) {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				img := filepath.Join(dir, name)
				if err := os.WriteFile(img, image, 0o600); err != nil {
					t.Fatal(err)
				}
				target := filepath.Join(dir, "card.img")
				before := cardBefore()
				if err := os.WriteFile(target, before, 0o600); err != nil {
					t.Fatal(err)
				}
				opens := &countingOpen{}
				_, err := Flash(context.Background(), Job{Image: FromFile(img), Devices: []string{target}, Open: opens.open, Meta: []*CardMeta{nodeMeta()}})
				if !errors.Is(err, ErrNoNodeMeta) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), "no card was touched") || !strings.Contains(err.Error(), "node worker-1") {
					t.Fatalf("%v, want ErrNoNodeMeta (%v) before any card", err, c.want)
				}
				if len(opens.opened) != 0 {
					t.Fatalf("cards opened: %q", opens.opened)
				}
				if got, _ := os.ReadFile(target); !bytes.Equal(got, before) {
					t.Fatal("the card changed although refused")
				}
			})
		}
	}
}

// A cluster's run (Job.Images): the image whose META is foreign fails its
// own cards before they are opened; the other image's card is flashed
// with its node.
func TestFlashImagesMETAContentRefusedPerImage(t *testing.T) {
	dir := t.TempDir()
	good, err := imagetest.GoodMETA().Raw(7)
	if err != nil {
		t.Fatal(err)
	}
	goodImg, badImg := filepath.Join(dir, "good.raw.xz"), filepath.Join(dir, "bad.raw.zst")
	x, _ := imagetest.XZBytes(good, 1<<20)
	z, _ := imagetest.ZstdBytes(foreignMETA(t))
	if err := os.WriteFile(goodImg, x, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badImg, z, 0o600); err != nil {
		t.Fatal(err)
	}
	cards := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "c.img")}
	before := cardBefore()
	for _, c := range cards {
		if err := os.WriteFile(c, before, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opens := &countingOpen{}
	m2 := *nodeMeta()
	m2.Node = "worker-2"
	out, err := Flash(context.Background(), Job{Images: []*Image{FromFile(badImg), FromFile(goodImg), FromFile(badImg)}, Devices: cards,
		Open: opens.open, Meta: []*CardMeta{nodeMeta(), &m2, nodeMeta()}})
	if err == nil || out == nil {
		t.Fatalf("%+v %v", out, err)
	}
	for _, i := range []int{0, 2} {
		if e := out.Cards[i].Err; !errors.Is(e, ErrNoNodeMeta) || !errors.Is(e, meta.ErrForeign) || !strings.Contains(e.Error(), "no card was touched") {
			t.Errorf("card %d: %v", i, e)
		}
		if got, _ := os.ReadFile(cards[i]); !bytes.Equal(got, before) {
			t.Errorf("card %d changed although refused", i)
		}
	}
	if !out.Cards[1].OK() || len(opens.opened) != 1 || opens.opened[0] != cards[1] {
		t.Fatalf("the good image's card: %+v, opened %q", out.Cards[1], opens.opened)
	}
	s, err := meta.ReadStorePath(cards[1])
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.ADV.Get(meta.MetalNetworkPlatformConfig); !bytes.Equal(v, nodeMeta().Tags[0].Value) {
		t.Fatalf("worker-2's card holds %q", v)
	}
}

// A stream (here the elevated child's stdin) comes once, in order: its
// META content is known only on the card, which is failed after its
// write (ErrNoNodeMeta, exit 9) holding the plain image, the error saying
// why (the image came as a stream) and that a cached or local image is
// checked before any card is touched.
func TestFlashStreamMETAContentRefusedAfterTheWrite(t *testing.T) {
	for name, raw := range map[string][]byte{"foreign data": foreignMETA(t), "no room": fullMETA(t)} {
		t.Run(name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			go func() {
				defer pw.Close()
				_, _ = elevate.SendImage(pw, bytes.NewReader(raw), int64(len(raw)))
			}()
			ctx := context.Background()
			target := filepath.Join(t.TempDir(), "card.img")
			// The end of stdin does not cancel here: the sender is done.
			stream := elevate.ReceiveImage(ctx, pr, func() {})
			_, err = Flash(ctx, Job{Image: FromFile("metal-arm64.raw"), Stream: stream, Devices: []string{target},
				Safety: devices.Options{CreateFile: true}, Meta: []*CardMeta{nodeMeta()}})
			if !errors.Is(err, ErrNoNodeMeta) || !meta.Refused(err) || !strings.Contains(err.Error(), "the card holds the plain image") ||
				!strings.Contains(err.Error(), streamMETANote) {
				t.Fatalf("%v", err)
			}
			if got, _ := os.ReadFile(target); !bytes.Equal(got, raw) {
				t.Fatal("the card does not hold the plain image")
			}
		})
	}
}

// Through the elevated write the parent, which has the image file, checks
// its META content before the child is started (before the password
// prompt): refused, no child run, the card's bytes as they were.
func TestFlashElevatedMETAContentRefusedBeforeThePrompt(t *testing.T) {
	dir := t.TempDir()
	for name, image := range metaImages(t, foreignMETA(t)) {
		img := filepath.Join(dir, name)
		if err := os.WriteFile(img, image, 0o600); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, "card.img")
		before := cardBefore()
		if err := os.WriteFile(target, before, 0o600); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(dir, "child-ran")
		var status []string
		_, err := Flash(context.Background(), Job{Image: FromFile(img), Devices: []string{target}, Meta: []*CardMeta{nodeMeta()},
			NeedsElevation: func(string) bool { return true },
			Elevate:        func([]string) (*exec.Cmd, error) { return exec.Command("touch", marker), nil },
			Status:         func(m string) { status = append(status, m) }})
		if !errors.Is(err, ErrNoNodeMeta) || !errors.Is(err, meta.ErrForeign) || !strings.Contains(err.Error(), "no card was touched") {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the elevated child was run", name)
		}
		if strings.Contains(strings.Join(status, "\n"), "asking for permission") {
			t.Fatalf("%s: asked for permission: %q", name, status)
		}
		if got, _ := os.ReadFile(target); !bytes.Equal(got, before) {
			t.Fatalf("%s: the card changed although refused", name)
		}
	}
}
