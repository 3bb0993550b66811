package inventory

import (
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

func flashedCard(t *testing.T) string {
	t.Helper()

	path := testkit.TalosCard(t, "card.img")

	// The image already carries a tag (as a factory image with
	// customization.meta would): it must survive.
	if _, err := meta.WriteTagPath(path, meta.UserReserved1, []byte("labels: kept")); err != nil {
		t.Fatal(err)
	}

	return path
}

var worker1 = Node{
	Hostname:  "worker-1",
	Role:      "worker",
	Address:   netip.MustParsePrefix("127.0.0.21/8"),
	Gateway:   netip.MustParseAddr("127.0.0.1"),
	DNS:       []netip.Addr{netip.MustParseAddr("127.0.0.53")},
	Interface: "end0",
}

// Written by the inventory, read back the way Talos boots it (nodetest's
// own ADV reader, machinery's type).
func TestWriteCardBootsAsTalos(t *testing.T) {
	path := flashedCard(t)

	w, err := worker1.WriteCardPath(path)
	if err != nil {
		t.Fatal(err)
	}

	if len(w.Kept) != 1 || w.Kept[0] != meta.UserReserved1 {
		t.Fatalf("kept %v", w.Kept)
	}

	booted, err := nodetest.ReadCardAtBoot(path)
	if err != nil {
		t.Fatal(err)
	}

	if booted.Hostname != "worker-1" || booted.Address != worker1.Address || booted.Link != "end0" ||
		booted.Gateway != worker1.Gateway || len(booted.DNS) != 1 || booted.DNS[0] != worker1.DNS[0] || booted.METACopy != 1 {
		t.Fatalf("booted %+v", booted)
	}

	card, err := meta.ReadStorePath(path)
	if err != nil {
		t.Fatal(err)
	}

	if v, _ := card.ADV.Get(meta.UserReserved1); string(v) != "labels: kept" {
		t.Fatalf("0x0c = %q", v)
	}

	info, ok, err := CardNode(card)
	if err != nil || !ok || info.String() != "worker-1, 127.0.0.21/8" {
		t.Fatalf("CardNode: %+v %v %v", info, ok, err)
	}

	// A second write (the card re-used for another node) replaces it.
	other := worker1
	other.Hostname, other.Address = "worker-2", netip.MustParsePrefix("127.0.0.22/8")

	if w, err := other.WriteCardPath(path); err != nil || !w.Replaced {
		t.Fatalf("rewrite: %+v %v", w, err)
	}

	if booted, _ := nodetest.ReadCardAtBoot(path); booted.Hostname != "worker-2" || booted.Address != other.Address {
		t.Fatalf("after rewrite %+v", booted)
	}
}

func TestWriteCardLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop device")
	}

	path := flashedCard(t)

	out, err := exec.Command("losetup", "-f", "--show", path).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}

	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })

	f, err := os.OpenFile(dev, os.O_RDWR|os.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}

	size, err := f.Seek(0, 2)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := worker1.WriteCard(f, size); err != nil {
		t.Fatal(err)
	}

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	booted, err := nodetest.ReadCardAtBoot(path) // the backing file: on the medium
	if err != nil || booted.Hostname != "worker-1" || booted.Address != worker1.Address {
		t.Fatalf("booted %+v %v", booted, err)
	}
}

func TestWriteCardRefusesPlainDisk(t *testing.T) {
	path, _ := testkit.Disk(t, "disk.img", 8<<20, []imagetest.Part{{Name: "data", Size: 4 << 20}})

	before, _ := os.ReadFile(path)

	_, err := worker1.WriteCardPath(path)
	if err == nil || !strings.Contains(err.Error(), "worker-1") || !strings.Contains(err.Error(), "no partition labelled META") {
		t.Fatalf("err = %v", err)
	}

	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("disk changed")
	}
}

func TestReadCardReport(t *testing.T) {
	path := flashedCard(t)

	read := func() *CardReport {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()

		st, _ := f.Stat()

		return ReadCard(f, st.Size())
	}

	rep := read()
	if !rep.Talos || rep.Node != nil || len(rep.Keys) != 1 || rep.Keys[0].Name != "UserReserved1" || len(rep.Problems) != 0 {
		t.Fatalf("before: %+v", rep)
	}

	if _, err := worker1.WriteCardPath(path); err != nil {
		t.Fatal(err)
	}

	rep = read()
	if rep.Node == nil || rep.Node.String() != "worker-1, 127.0.0.21/8" || len(rep.Keys) != 2 {
		t.Fatalf("after: %+v", rep)
	}
}

// ReadCardPath and Summary: the one line the GUI's card list shows, from
// a plain Talos image to the card written for its node.
func TestReadCardPathSummary(t *testing.T) {
	path := flashedCard(t)
	rep, size, err := ReadCardPath(path)
	if st, _ := os.Stat(path); err != nil || size != st.Size() {
		t.Fatalf("ReadCardPath: size %d, %v", size, err)
	}
	if got := rep.Summary(); got != "a Talos image (no node written on it)" {
		t.Errorf("plain image: %q", got)
	}
	if _, err := worker1.WriteCardPath(path); err != nil {
		t.Fatal(err)
	}
	if rep, _, _ = ReadCardPath(path); rep.Summary() != "Talos for worker-1, 127.0.0.21/8" {
		t.Errorf("written card: %q", rep.Summary())
	}
	if (&CardReport{}).Summary() != "" {
		t.Error("a card without Talos has a summary")
	}
}

// A re-flash killed before it wrote the card's head leaves the earlier
// flash's backup GPT and META: the card list says it is incomplete, never
// the earlier node.
func TestReadCardInterruptedFlash(t *testing.T) {
	path := flashedCard(t)
	if _, err := worker1.WriteCardPath(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, _, err := ReadCardPath(path)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Incomplete || rep.Talos || rep.Node != nil || rep.META != nil || rep.Record != nil {
		t.Errorf("report %+v", rep)
	}
	if got := rep.Summary(); strings.Contains(got, "worker-1") || !strings.Contains(got, "interrupted flash") {
		t.Errorf("summary %q", got)
	}
}

// A META network config of the wrong shape (another tool's, a corrupt
// one) is said in the file's terms, never with Go's struct types (it read
// "cannot unmarshal !!str `hello` into []struct { Address string ...").
func TestParseNetworkConfigSaysShapes(t *testing.T) {
	for in, want := range map[string]string{
		"addresses: hello":               "META network config (key 0x0a): line 1: a string (`hello`) where a list is expected",
		"routes: {a: b}":                 "META network config (key 0x0a): line 1: a mapping where a list is expected",
		"hostnames: [1]":                 "META network config (key 0x0a): line 1: a number (`1`) where a mapping is expected",
		"addresses:\n  - address: [x]\n": "META network config (key 0x0a): line 2: a list where a string is expected",
	} {
		_, err := ParseNetworkConfig([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("%q: %v\nwant %s", in, err, want)
		}
	}
}
