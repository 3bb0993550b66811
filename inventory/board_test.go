package inventory

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
)

// A node's board: rpi4 when not given, rpi5 when written, a typo refused
// with the board it is probably a typo of (the overlay's name too), each
// at its file:line.
func TestNodeBoard(t *testing.T) {
	inv, err := Parse([]byte(`nodes:
  - hostname: cp-1
    role: controlplane
    address: 10.0.0.10/24
  - hostname: worker-5
    role: worker
    board: rpi5
    address: 10.0.0.15/24
`), "inv.yaml", "", Options{SkipFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Nodes[0].Board != factory.BoardRPi4 || inv.Nodes[1].Board != factory.BoardRPi5 || inv.Nodes[1].BoardLine != 7 {
		t.Fatalf("boards %q (line %d), %q", inv.Nodes[0].Board, inv.Nodes[1].BoardLine, inv.Nodes[1].Board)
	}

	for typo, want := range map[string]string{
		"rpi_5":  "inv.yaml:4: node w: unknown board \"rpi_5\" (valid: rpi4, rpi5) (fix: did you mean rpi5? (Raspberry Pi 5))",
		"Rpi5":   "inv.yaml:4: node w: unknown board \"Rpi5\" (valid: rpi4, rpi5) (fix: did you mean rpi5? (Raspberry Pi 5))",
		"pi4":    "inv.yaml:4: node w: unknown board \"pi4\" (valid: rpi4, rpi5) (fix: did you mean rpi4? (Raspberry Pi 4B))",
		"jetson": "inv.yaml:4: node w: unknown board \"jetson\" (valid: rpi4, rpi5) (fix: write board: rpi4 or rpi5 (rpi4 is the Raspberry Pi 4B, rpi5 the Raspberry Pi 5), or leave it out for rpi4)",
	} {
		_, err := Parse([]byte("nodes:\n  - hostname: w\n    role: worker\n    board: "+typo+"\n    address: 10.0.0.11/24\n"), "inv.yaml", "", Options{SkipFiles: true})
		var ps Problems
		if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Error() != want {
			t.Errorf("board %s:\n got %v\nwant %s", typo, err, want)
		}
	}
}

// A board is refused below its minimum Talos version, with the version it
// needs, once at talosVersion:; a profile made for one board is refused on
// another, and gives its board to a node that names none.
func TestNodeBoardChecks(t *testing.T) {
	_, err := Parse([]byte(`talosVersion: v1.12.2
nodes:
  - hostname: w5
    role: worker
    board: rpi5
    address: 10.0.0.15/24
  - hostname: w6
    role: worker
    board: rpi5
    address: 10.0.0.16/24
  - hostname: w4
    role: worker
    address: 10.0.0.14/24
`), "inv.yaml", "", Options{SkipFiles: true})
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 ||
		ps[0].Error() != "inv.yaml:1: talosVersion v1.12.2: w5 (board rpi5) needs Talos v1.12.3 or later: its overlay rpi_5 is offered from v1.12.3 on (fix: set talosVersion: v1.12.3 or later (the Raspberry Pi 5 has no Talos image before it))" {
		t.Fatalf("got %v", err)
	}

	profiles, err := factory.ParseProfiles([]byte("profiles:\n  - name: gw5\n    board: rpi5\n    extensions: [siderolabs/tailscale]\n"))
	if err != nil {
		t.Fatal(err)
	}
	all := factory.MergeProfiles(factory.BuiltinProfiles(), profiles)
	inv, err := Parse([]byte("nodes:\n  - hostname: gw\n    profile: gw5\n    address: 10.0.0.20/24\n"), "inv.yaml", "", Options{SkipFiles: true, Profiles: all})
	if err != nil || inv.Nodes[0].Board != factory.BoardRPi5 {
		t.Fatalf("a node of a Pi 5 profile: %v, %+v", err, inv)
	}
	_, err = Parse([]byte("nodes:\n  - hostname: gw\n    profile: gw5\n    board: rpi4\n    address: 10.0.0.20/24\n"), "inv.yaml", "", Options{SkipFiles: true, Profiles: all})
	want := "inv.yaml:4: node gw (board rpi4, the Raspberry Pi 4B): profile gw5 is for the Raspberry Pi 5 (board rpi5, overlay rpi_5) (fix: give gw a profile for rpi4, write board: rpi5 if it is a Raspberry Pi 5, or write board: any in profile gw5 (instead of its overlay) so it follows each node's board)"
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

// A mixed cluster has one installer file per role and board: a Pi 5
// worker's own installer passes; the Pi 4 worker's installer named for
// it is refused as another board's (its overlay), at the installer line,
// with the file to point at and the command that writes it.
func TestInstallerFileOfAnotherBoard(t *testing.T) {
	installer := func(role string, b factory.Board) string {
		p, err := factory.BuiltinProfile(role, b)
		if err != nil {
			t.Fatal(err)
		}
		data, err := factory.InstallerPatch(p, "")
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	inv := `nodes:
  - hostname: cp-1
    role: controlplane
    address: 10.0.0.10/24
    installer: talos/installer-controlplane.yaml
  - hostname: worker-5
    role: worker
    board: rpi5
    address: 10.0.0.15/24
    installer: INSTALLER
`
	files := map[string]string{
		"talos/installer-controlplane.yaml": installer(factory.RoleControlPlane, factory.BoardRPi4),
		"talos/installer-worker.yaml":       installer(factory.RoleWorker, factory.BoardRPi4),
		"talos/installer-worker-rpi5.yaml":  installer(factory.RoleWorker, factory.BoardRPi5),
		"talos/bare.yaml":                   "machine:\n  install:\n    image: factory.talos.dev/metal-installer/" + workerID + ":v1.14.5\n",
	}

	files["talosflash.yaml"] = strings.Replace(inv, "INSTALLER", "talos/installer-worker-rpi5.yaml", 1)
	dir := testkit.WriteFiles(t, files)
	if _, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{}); err != nil {
		t.Fatalf("the Pi 5 worker's own installer: %v", err)
	}

	for _, file := range []string{"talos/installer-worker.yaml", "talos/bare.yaml"} { // its comments, or its ID alone
		files["talosflash.yaml"] = strings.Replace(inv, "INSTALLER", file, 1)
		dir := testkit.WriteFiles(t, files)
		_, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{})
		var ps Problems
		if !errors.As(err, &ps) || len(ps) != 1 {
			t.Fatalf("%s: %v", file, err)
		}
		got := ps[0].Error()
		for _, want := range []string{
			"talosflash.yaml:10: node worker-5 (worker, board rpi5): installer " + filepath.Join(dir, file) + ":",
			" is for the Raspberry Pi 4B (board rpi4, overlay rpi_generic), not the node's Raspberry Pi 5 (overlay rpi_5)",
			"(fix: point installer: at the worker for rpi5 installer file, talos/installer-worker-rpi5.yaml, written with talosflash schematic --role worker --board rpi5 --version v1.14.5 --installer-yaml > talos/installer-worker-rpi5.yaml)",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: no %q in\n%s", file, want, got)
			}
		}
	}
}

// The boot partition's root folder is read from FAT12, FAT16 and FAT32
// (a root folder over several clusters, long names over several entries),
// each as factorytest writes it with its own code; its files say the
// board.
func TestBootFilesSayTheBoard(t *testing.T) {
	many := map[string][]byte{}
	for i := range 40 { // more entries than one FAT32 cluster holds
		many[strings.Repeat("x", i%20+1)+"-a-rather-long-file-name.dtbo"] = []byte{byte(i)}
	}
	for _, c := range []struct {
		name  string
		size  int64
		fat32 bool
		files map[string][]byte
		board factory.Board
	}{
		{"FAT12 rpi_generic", 1 << 20, false, factorytest.OverlayBootFiles("rpi_generic"), factory.BoardRPi4},
		{"FAT16 rpi_5", 4 << 20, false, factorytest.OverlayBootFiles("rpi_5"), factory.BoardRPi5},
		{"FAT32 rpi_5", 2 << 20, true, merge(many, factorytest.OverlayBootFiles("rpi_5")), factory.BoardRPi5},
		{"FAT32 rpi_generic", 2 << 20, true, merge(many, factorytest.OverlayBootFiles("rpi_generic")), factory.BoardRPi4},
		{"FAT16 no overlay", 4 << 20, false, map[string][]byte{"EFI.TXT": []byte("x")}, ""},
	} {
		fs, err := factorytest.FATImage(c.size, c.files, c.fat32)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		disk := append(make([]byte, 4096), fs...) // at an offset, as a partition
		names, err := fatRootNames(bytes.NewReader(disk), 4096, c.size)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(names) != len(c.files) {
			t.Fatalf("%s: %d names, want %d: %q", c.name, len(names), len(c.files), names)
		}
		for _, n := range names {
			if _, ok := c.files[n]; !ok {
				t.Fatalf("%s: read %q, not a file written", c.name, n)
			}
		}
		if got := readBootBoard(bytes.NewReader(disk), 4096, c.size); got.Board != c.board || got.Err != nil || got.Files != len(c.files) {
			t.Fatalf("%s: %+v, want board %q", c.name, got, c.board)
		}
	}

	// Not FAT (a test image's EFI partition holds data), or cut short:
	// nothing is said, nothing read past the partition.
	raw, err := imagetest.Raw(1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBootBoard(bytes.NewReader(raw), 0, 1<<20); got.Err == nil || got.Board != "" {
		t.Fatalf("random data: %+v", got)
	}
	fs, _ := factorytest.FATImage(4<<20, factorytest.OverlayBootFiles("rpi_5"), false)
	if got := readBootBoard(bytes.NewReader(fs), 0, 1<<20); got.Err == nil {
		t.Fatalf("a filesystem larger than its partition: %+v", got)
	}
}

func merge(a, b map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// A card says its board twice: talosflash's record (META 0x0e) and its
// boot partition's files; the two are cross-checked.
func TestCardBoard(t *testing.T) {
	raw, err := imagetest.TalosRaw(16<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		overlay, record string
		want            factory.Board
		source, problem string
	}{
		{"rpi_5", "rpi5", factory.BoardRPi5, "record", ""},
		{"rpi_5", "", factory.BoardRPi5, "boot files", ""},
		{"rpi_generic", "rpi4", factory.BoardRPi4, "record", ""},
		{"rpi_generic", "rpi5", factory.BoardRPi5, "record", "the record says board rpi5, but the boot partition holds start4.elf"},
	} {
		img, err := factorytest.WithBootFiles(raw, factorytest.OverlayBootFiles(c.overlay))
		if err != nil {
			t.Fatal(err)
		}
		path := testkit.WriteFile(t, t.TempDir(), "card.img", img)
		if c.record != "" {
			rec := Record{Schematic: workerID, TalosVersion: "v1.14.5", Profile: "worker", Board: c.record}
			if _, err := meta.WriteTagPath(path, RecordKey, rec.Bytes()); err != nil {
				t.Fatal(err)
			}
		}
		rep, _, err := ReadCardPath(path)
		if err != nil {
			t.Fatal(err)
		}
		b, source := rep.Board()
		problems := strings.Join(rep.Problems, "\n")
		if b != c.want || source != c.source || rep.Boot == nil || (c.problem == "") != (problems == "") || !strings.Contains(problems, c.problem) {
			t.Fatalf("%s/%s: board %q from %q, boot %+v, problems %q", c.overlay, c.record, b, source, rep.Boot, problems)
		}
		if c.want == factory.BoardRPi5 && c.record != "" && !strings.Contains(rep.Summary(), "worker for rpi5") {
			t.Fatalf("summary %q", rep.Summary())
		}
	}
}
