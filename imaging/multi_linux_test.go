//go:build linux

package imaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// Three loop devices from one decode, one of them backed by a 2 MiB tmpfs
// that fills up in the middle of the 6 MiB image (the kernel fails its
// writes with EIO): that card fails, the two others hold the image and
// verify with O_DIRECT.
func TestFlashAllLoopDevicesOneFills(t *testing.T) {
	// Only what differs is written: 4 MiB of data in the image, more than
	// the tmpfs holds, whatever the zeroed card already has.
	raw := bytes.Clone(testImage(t).Raw)
	r := rand.New(rand.NewPCG(3, 4))
	for i := 1 << 20; i < 5<<20; i++ {
		raw[i] = byte(r.Uint32())
	}
	xzb, err := imagetest.XZBytes(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	img := &imagetest.Fixture{Size: int64(len(raw)), Raw: raw, XZ: xzb, SHA256: hex.EncodeToString(sum[:])}
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	good1 := imagetest.LoopDevice(t, 16<<20, false)
	full := imagetest.LoopDeviceIn(t, smallFS(t), 16<<20, false)
	good2 := imagetest.LoopDevice(t, 16<<20, false)
	targets := []string{good1, full, good2}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(cards[1].Err, ErrIncomplete) || errors.Is(cards[1].Err, ErrVerifyMismatch) {
		t.Fatalf("%s (on a full tmpfs): %v, want an incomplete card", full, cards[1].Err)
	}
	t.Logf("full card: %v", cards[1].Err)
	for _, i := range []int{0, 2} {
		c := cards[i]
		if c.Err != nil || !c.Verified || c.VerifyMode != "O_DIRECT" {
			t.Fatalf("%s: %+v, %v", c.Target, c, c.Err)
		}
		if got := imagetest.FileSHA256(t, c.Target, img.Size); got != img.SHA256 {
			t.Fatalf("%s holds %s, want %s", c.Target, got, img.SHA256)
		}
	}
}
