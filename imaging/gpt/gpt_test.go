package gpt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

func readFile(t *testing.T, path string) (*Table, error) {
	t.Helper()

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}

	return Read(f, st.Size())
}

func TestReadBuiltDisk(t *testing.T) {
	path, offs := testkit.Disk(t, "disk.img", 16<<20, imagetest.TalosParts())

	tab, err := readFile(t, path)
	if err != nil {
		t.Fatal(err)
	}

	if !tab.Primary || !tab.Backup || len(tab.Problems) > 0 {
		t.Fatalf("primary %v backup %v problems %q", tab.Primary, tab.Backup, tab.Problems)
	}

	if got := strings.Join(tab.Labels(), ","); got != "EFI,BOOT,META,STATE" {
		t.Fatalf("labels %s", got)
	}

	m, ok := tab.Find("META")
	if !ok || m.Offset != offs[2] || m.Size != 1<<20 || m.Index != 3 {
		t.Fatalf("META = %+v, want offset %d size 1 MiB index 3", m, offs[2])
	}

	if m.Type != "0FC63DAF-8483-4772-8E79-3D69D8477DE4" {
		t.Fatalf("type %s", m.Type)
	}

	if _, ok := tab.Find("meta"); ok {
		t.Fatal("labels compare exactly, as Talos does")
	}
}

func corrupt(t *testing.T, path string, off int64) {
	t.Helper()

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}

	b[0] ^= 0xFF
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestBackupUsedWhenPrimaryDamaged(t *testing.T) {
	for name, off := range map[string]int64{
		"header":  512 + 40,  // first usable LBA: header CRC fails
		"entries": 1024 + 57, // a name byte: entry CRC fails
	} {
		t.Run(name, func(t *testing.T) {
			path, _ := testkit.Disk(t, "disk.img", 16<<20, imagetest.TalosParts())
			corrupt(t, path, off)

			tab, err := readFile(t, path)
			if err != nil {
				t.Fatal(err)
			}

			if tab.Primary || !tab.Backup || len(tab.Problems) == 0 {
				t.Fatalf("primary %v backup %v problems %q", tab.Primary, tab.Backup, tab.Problems)
			}

			if _, ok := tab.Find("META"); !ok {
				t.Fatal("META not found through the backup")
			}
		})
	}
}

func TestBothDamagedIsNoGPT(t *testing.T) {
	path, _ := testkit.Disk(t, "disk.img", 16<<20, imagetest.TalosParts())
	corrupt(t, path, 512+40)
	corrupt(t, path, 16<<20-512+40)

	_, err := readFile(t, path)
	if !errors.Is(err, ErrNoGPT) || !strings.Contains(err.Error(), "CRC32") {
		t.Fatalf("err = %v, want ErrNoGPT naming the CRC", err)
	}
}

func TestMBROnlyAndEmpty(t *testing.T) {
	dir := t.TempDir()

	mbr := make([]byte, 4<<20)
	mbr[510], mbr[511] = 0x55, 0xAA
	mbrPath := filepath.Join(dir, "mbr.img")
	if err := os.WriteFile(mbrPath, mbr, 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := readFile(t, mbrPath); !errors.Is(err, ErrNoGPT) {
		t.Fatalf("MBR-only: %v", err)
	}

	small := filepath.Join(dir, "small.img")
	if err := os.WriteFile(small, []byte("EFI PART"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := readFile(t, small); !errors.Is(err, ErrNoGPT) {
		t.Fatalf("tiny: %v", err)
	}
}

// An image written onto a larger card: the backup sits where the image
// ended, not at the card's last LBA.
func TestImageOnLargerCard(t *testing.T) {
	path, _ := testkit.Disk(t, "disk.img", 16<<20, imagetest.TalosParts())
	if err := os.Truncate(path, 64<<20); err != nil {
		t.Fatal(err)
	}

	tab, err := readFile(t, path)
	if err != nil {
		t.Fatal(err)
	}

	if !tab.Primary || !tab.Backup || len(tab.Problems) != 0 {
		t.Fatalf("primary %v backup %v: %q", tab.Primary, tab.Backup, tab.Problems)
	}
}

// imagetest's generated images have a valid primary and backup (the
// flash pipeline checks both: a cut image ends before its backup).
func TestGeneratedImage(t *testing.T) {
	raw, err := imagetest.Raw(32<<20, 7)
	if err != nil {
		t.Fatal(err)
	}

	tab, err := Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}

	if !tab.Primary || !tab.Backup {
		t.Fatalf("primary %v backup %v", tab.Primary, tab.Backup)
	}

	if got := strings.Join(tab.Labels(), ","); got != "EFI,BIOS,BOOT,META,STATE,EPHEMERAL" {
		t.Fatalf("labels %s", got)
	}
}

// util-linux's partx (libblkid's own GPT parser, CRCs checked) agrees
// with the builder and the reader on every partition's start, size, name
// and GUID.
func TestPartxAgrees(t *testing.T) {
	partx, err := exec.LookPath("partx")
	if err != nil {
		t.Skip("partx (util-linux) not installed")
	}

	path, _ := testkit.Disk(t, "disk.img", 16<<20, imagetest.TalosParts())

	out, err := exec.Command(partx, "--raw", "--noheadings", "-o", "NR,START,SECTORS,NAME,UUID", path).Output()
	if err != nil {
		t.Fatalf("partx: %v", err)
	}

	tab, err := readFile(t, path)
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, p := range tab.Partitions {
		got = append(got, fmt.Sprintf("%d %d %d %s %s", p.Index, p.Offset/512, p.Size/512, p.Name, strings.ToLower(p.GUID)))
	}

	if want := strings.TrimSpace(string(out)); strings.Join(got, "\n") != want {
		t.Fatalf("reader:\n%s\npartx:\n%s", strings.Join(got, "\n"), want)
	}
}

func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "d.img")

	if _, err := imagetest.WriteGPTDisk(path, 2<<20+64<<10, []imagetest.Part{{Name: "META", Size: 32 << 10}}); err != nil {
		f.Fatal(err)
	}

	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}

	// Only the interesting sectors vary; the rest is zeros in between.
	f.Add(seed[:34*512], seed[len(seed)-33*512:])
	f.Add([]byte("EFI PART"), []byte{})

	f.Fuzz(func(t *testing.T, head, tail []byte) {
		const size = 256 << 10
		disk := make([]byte, size)
		copy(disk, head)
		if len(tail) <= size {
			copy(disk[size-len(tail):], tail)
		}

		tab, err := Read(bytes.NewReader(disk), size)
		if err != nil {
			return
		}

		for _, p := range tab.Partitions {
			if p.Offset < 0 || p.Size <= 0 || p.Offset+p.Size > size {
				t.Fatalf("partition outside the disk: %+v", p)
			}
		}
	})
}
