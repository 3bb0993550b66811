package main

// The card states of the bmaptool comparison (bench/cards.sh): a
// Talos-like image, an older card of another node, what differs, and
// whether a card's META is the image's.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
)

// genTalos writes imagetest.TalosRaw: Raw's data with a Talos-like table
// (EFI, BOOT, a blank 1 MiB META, EPHEMERAL), so a node's META fits.
func genTalos(path string, size, seed int64) error {
	raw, err := imagetest.TalosRaw(size, seed)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// oldCard writes what a card flashed with an older Talos for another node
// holds: the image with the first 8 MiB of BOOT's data other (an older
// kernel) and a META holding that node's address and hostname.
func oldCard(args []string) error {
	fs := flag.NewFlagSet("oldcard", flag.ExitOnError)
	fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("oldcard: need the raw image and the card file to write")
	}
	raw, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	tab, err := gpt.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return err
	}
	boot, ok := tab.Find("BOOT")
	if !ok {
		return errors.New("oldcard: no BOOT partition")
	}
	r := rand.New(rand.NewPCG(77, 77))
	old := raw[boot.Offset : boot.Offset+min(boot.Size, 8<<20)]
	for i := range old {
		old[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(fs.Arg(1), raw, 0o644); err != nil {
		return err
	}
	cfg := "addresses:\n  - address: 192.168.1.31/24\n    linkName: end0\n    family: inet4\n    layer: platform\nhostnames:\n  - hostname: old-worker-3\n    layer: platform\n"
	_, err = meta.WriteTagsPath(fs.Arg(1), []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: []byte(cfg)}})
	return err
}

// diff4K prints how many bytes of the image's 4 KiB blocks differ from
// what the card held before (the card at least as large as the image).
func diff4K(args []string) error {
	if len(args) != 2 {
		return errors.New("diff4k: need the card (before) and the raw image")
	}
	card, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer card.Close()
	img, err := os.Open(args[1])
	if err != nil {
		return err
	}
	defer img.Close()
	a, b := make([]byte, 4096), make([]byte, 4096)
	var d int64
	for {
		n, err := io.ReadFull(img, b)
		if n == 0 {
			break
		}
		m, _ := io.ReadFull(card, a[:n])
		if m < n || !bytes.Equal(a[:n], b[:n]) {
			d += int64(n)
		}
		if err != nil {
			break
		}
	}
	fmt.Println(d)
	return nil
}

// metaState prints "image" when the card's META partition (the image's
// table) holds exactly the image's bytes, else "stale" and the keys and
// hostname found there.
func metaState(args []string) error {
	if len(args) != 2 {
		return errors.New("meta: need the card and the raw image")
	}
	raw, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	tab, err := gpt.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return err
	}
	p, ok := tab.Find(meta.PartitionLabel)
	if !ok {
		return errors.New("meta: the image has no META partition")
	}
	card, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer card.Close()
	got := make([]byte, p.Size)
	if _, err := card.ReadAt(got, p.Offset); err != nil {
		return err
	}
	if bytes.Equal(got, raw[p.Offset:p.Offset+p.Size]) {
		fmt.Println("image")
		return nil
	}
	what := "other bytes"
	if a, _, err := meta.Parse(got[:meta.Size]); err == nil && a != nil {
		if v, ok := a.Get(meta.MetalNetworkPlatformConfig); ok {
			what = fmt.Sprintf("an ADV with 0x0a: %q", firstHostname(v))
		}
	}
	fmt.Println("stale:", what)
	return nil
}

func firstHostname(cfg []byte) string {
	i := bytes.Index(cfg, []byte("hostname: "))
	if i < 0 {
		return ""
	}
	s := cfg[i+len("hostname: "):]
	if j := bytes.IndexByte(s, '\n'); j >= 0 {
		s = s[:j]
	}
	return string(s)
}
