package nodetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
)

func TestReadCardFallsBackAndBlank(t *testing.T) {
	path, offs := testkit.Disk(t, "card.img", testkit.CardSize, imagetest.TalosParts())

	// A fresh image: META zeroed, no network config: Talos would use DHCP.
	c, err := ReadCardAtBoot(path)
	if err != nil || c.Network != nil || c.Address.IsValid() || c.METACopy != 0 {
		t.Fatalf("blank: %+v %v", c, err)
	}

	value := "addresses:\n  - address: 127.0.0.31/8\n    linkName: end0\n    layer: platform\nhostnames:\n  - hostname: cp-1\n    domainname: lab\n"
	if _, err := meta.WriteTagPath(path, meta.MetalNetworkPlatformConfig, []byte(value)); err != nil {
		t.Fatal(err)
	}

	// Copy 1 damaged: Talos (and this reader) take copy 2.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := f.WriteAt([]byte{0xff}, offs[2]+10); err != nil {
		t.Fatal(err)
	}

	f.Close()

	c, err = ReadCardAtBoot(path)
	if err != nil || c.METACopy != 2 || c.Hostname != "cp-1.lab" || c.Address.String() != "127.0.0.31/8" || c.Link != "end0" {
		t.Fatalf("copy 2: %+v %v", c, err)
	}
}

func TestReadCardNotADisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := ReadCardAtBoot(path); err == nil {
		t.Fatal("a blank file read as a card")
	}
}
