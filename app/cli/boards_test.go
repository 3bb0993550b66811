package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

// The four role x board images, each its own bytes: a Talos-shaped image
// per role (seed) with its board's overlay boot files in its EFI partition.
var (
	boardFixturesOnce sync.Once
	boardFixtures     map[string]*imagetest.Fixture // "controlplane/rpi5"
)

func boardFixture(t *testing.T) map[string]*imagetest.Fixture {
	t.Helper()
	boardFixturesOnce.Do(func() {
		out := map[string]*imagetest.Fixture{}
		for i, role := range factory.BuiltinRoles() {
			raw, err := imagetest.TalosRaw(imageSize, int64(20+i))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range factory.Boards() {
				img, err := factorytest.WithBootFiles(raw, factorytest.OverlayBootFiles(b.Overlay().Name))
				if err != nil {
					t.Fatal(err)
				}
				xz, err := imagetest.XZBytes(img, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				fx := &imagetest.Fixture{Size: imageSize, Raw: img, XZ: xz}
				fx.SHA256 = imagetest.FileSHA256(t, testkit.WriteFile(t, t.TempDir(), "img", img), imageSize)
				out[role+"/"+string(b)] = fx
			}
		}
		boardFixtures = out
	})
	if len(boardFixtures) != 4 {
		t.Fatal("board fixtures failed")
	}
	return boardFixtures
}

// boardFactory serves each built-in role on each board, its own image.
func boardFactory(t *testing.T) (*factorytest.Server, map[string]*imagetest.Fixture, map[string]string) {
	t.Helper()
	fxs := boardFixture(t)
	srv := factorytest.New(t)
	ids := map[string]string{}
	for _, b := range factory.Boards() {
		for _, p := range factory.BuiltinProfilesFor(b) {
			id, err := p.SchematicID()
			if err != nil {
				t.Fatal(err)
			}
			key := p.Name + "/" + string(b)
			ids[key] = id
			srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", fxs[key].Zstd(t))
		}
	}
	return srv, fxs, ids
}

// mixedInventory writes an inventory of a Pi 4 and a Pi 5 of each role
// (and a second Pi 5 worker) with the test cluster's configs.
func mixedInventory(t *testing.T, dir string) string {
	t.Helper()
	testkit.Inventory{Configs: true}.Write(t, dir) // talos/*.yaml
	return testkit.WriteFile(t, dir, "mixed.yaml", `cluster: home
gateway: 127.0.0.1
dns: [127.0.0.1]
nodes:
  - hostname: cp-1
    role: controlplane
    address: 127.0.0.21/8
    config: talos/controlplane.yaml
  - hostname: worker-1
    role: worker
    address: 127.0.0.22/8
    config: talos/worker.yaml
  - hostname: cp-5
    role: controlplane
    board: rpi5
    address: 127.0.0.25/8
    config: talos/controlplane.yaml
  - hostname: worker-5
    role: worker
    board: rpi5
    address: 127.0.0.26/8
    config: talos/worker.yaml
  - hostname: worker-6
    role: worker
    board: rpi5
    address: 127.0.0.27/8
    config: talos/worker.yaml
`)
}

// A mixed cluster in one run: Pi 4 and Pi 5 nodes of both roles, each
// card its role's image on its board byte for byte (outside META), each
// of the four images downloaded once; each card records its board, and
// `card` reads it back and finds the boot partition agreeing.
func TestFlashMixedBoardsOneRun(t *testing.T) {
	srv, fxs, ids := boardFactory(t)
	dir := t.TempDir()
	inv := mixedInventory(t, dir)
	hosts := []string{"cp-1", "worker-1", "cp-5", "worker-5", "worker-6"}
	keys := []string{"controlplane/rpi4", "worker/rpi4", "controlplane/rpi5", "worker/rpi5", "worker/rpi5"}
	addrs := []string{"127.0.0.21/8", "127.0.0.22/8", "127.0.0.25/8", "127.0.0.26/8", "127.0.0.27/8"}
	args := []string{"--flash", "--inventory", inv, "--yes", "--create-file", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}
	var cards []string
	for _, h := range hosts {
		c := filepath.Join(dir, h+".img")
		cards = append(cards, c)
		args = append(args, "--hostname", h, "--device", c)
	}
	code, _, stderr := cliRun(t, args...)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var want int64
	for _, k := range []string{"controlplane/rpi4", "worker/rpi4", "controlplane/rpi5", "worker/rpi5"} {
		want += int64(len(fxs[k].Zstd(t)))
	}
	if got := srv.BytesServed(); got != want {
		t.Fatalf("served %d bytes, want each of the four images once: %d", got, want)
	}
	for i, h := range hosts {
		checkNodeCard(t, cards[i], fxs[keys[i]], h, addrs[i], strings.Split(keys[i], "/")[0], ids[keys[i]])
		rep, _, err := inventory.ReadCardPath(cards[i])
		if wantBoard := strings.Split(keys[i], "/")[1]; err != nil || rep.Record == nil || rep.Record.Board != wantBoard || rep.Boot == nil || string(rep.Boot.Board) != wantBoard {
			t.Fatalf("%s: %v, record %+v, boot %+v, want board %s", h, err, rep.Record, rep.Boot, wantBoard)
		}
	}
	for _, want := range []string{"image: profile worker for rpi5", "schematic " + ids["worker/rpi5"], "image: profile controlplane for rpi5"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("no %q in\n%s", want, stderr)
		}
	}

	code, stdout, stderr := cliRun(t, "card", cards[3])
	if code != contract.ExitOK || !strings.Contains(stdout, "Board: Raspberry Pi 5 (rpi5), from talosflash's record (META 0x0e); the boot partition agrees: bcm2712-rpi-5-b.dtb without start4.elf") ||
		!strings.Contains(stdout, "profile worker") {
		t.Fatalf("card %s: exit %d\n%s%s", cards[3], code, stdout, stderr)
	}
	code, stdout, _ = cliRun(t, "card", cards[1], "--json")
	b := answerMap(t, stdout, contract.TypeCard)["board"].(map[string]any)
	if code != contract.ExitOK || b["board"] != "rpi4" || b["source"] != "record" || b["boot_files"] != "rpi4" {
		t.Fatalf("card --json: %s", stdout)
	}
}

// --board builds the role for the board (schematic, its installer file),
// a typo gets the board it is probably a typo of, a board below its
// minimum Talos version is refused with the version it needs, before any
// card or the factory.
func TestBoardFlag(t *testing.T) {
	code, stdout, stderr := cliRun(t, "schematic", "--role", "worker", "--board", "rpi5")
	if code != contract.ExitOK || !strings.Contains(stdout, "name: rpi_5") || !strings.Contains(stdout, "# id: a636242df247ad4aad2e36d1026d8d4727b716a3061749bd7b19651e548f65e4") ||
		!strings.Contains(stdout, "# board: rpi5 (Raspberry Pi 5, overlay rpi_5)") {
		t.Fatalf("schematic --board rpi5: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cliRun(t, "schematic", "--role", "controlplane", "--board", "rpi5", "--installer-yaml")
	if code != contract.ExitOK || !strings.Contains(stdout, "#     name: rpi_5") ||
		!strings.Contains(stdout, "metal-installer/e761366799ebd34f6047dc1ec81548129662ca740498063e623c98eac71a3b81:v1.14.5") {
		t.Fatalf("--installer-yaml --board rpi5: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = cliRun(t, "schematic", "--role", "worker", "--board", "rpi5", "--json")
	if m := answerMap(t, stdout, contract.TypeSchematic); code != contract.ExitOK || m["board"] != "rpi5" || m["id"] != "a636242df247ad4aad2e36d1026d8d4727b716a3061749bd7b19651e548f65e4" {
		t.Fatalf("schematic --json: %s", stdout)
	}

	fake := newConnCounter(t)
	missing := filepath.Join(t.TempDir(), "missing", "card.img")
	newCard := filepath.Join(t.TempDir(), "card.img") // --create-file: never created
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"schematic", "--role", "worker", "--board", "rpi_5"}, `schematic: --board: unknown board "rpi_5" (did you mean rpi5? rpi_5 is its overlay's name; valid: rpi4, rpi5)`},
		{[]string{"flash", "--role", "worker", "--board", "pi5", "--device", missing, "--yes", "--factory", "http://" + fake.addr}, `flash: --board: unknown board "pi5" (did you mean rpi5?; valid: rpi4, rpi5)`},
		{[]string{"flash", "--role", "worker", "--board", "rpi5", "--version", "v1.12.2", "--device", newCard, "--yes", "--create-file", "--factory", "http://" + fake.addr},
			`profile "worker": the Raspberry Pi 5 (board rpi5) needs Talos v1.12.3 or later, not v1.12.2`},
		{[]string{"schematic", "--role", "controlplane", "--board", "rpi5", "--version", "v1.12.2"}, "needs Talos v1.12.3 or later, not v1.12.2"},
	} {
		code, _, stderr := cliRun(t, c.args...)
		if code != contract.ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, want 2 with %q:\n%s", c.args, code, c.want, stderr)
		}
	}
	if n := fake.n.Load(); n != 0 {
		t.Fatalf("the factory was contacted %d times", n)
	}
	if _, err := os.Stat(newCard); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused flash touched %s: %v", newCard, err)
	}

	// profiles lists each role on each board.
	code, stdout, _ = cliRun(t, "profiles")
	if code != contract.ExitOK || !strings.Contains(stdout, "NAME          BOARD") || strings.Count(stdout, "worker  ") < 2 ||
		!strings.Contains(stdout, "a636242df247ad4aad2e36d1026d8d4727b716a3061749bd7b19651e548f65e4  Raspberry Pi 5 worker") {
		t.Fatalf("profiles:\n%s", stdout)
	}
}

// Issue 39: a typo of a role gets the role it is probably a typo of, in
// flash and schematic alike.
func TestRoleTypoDidYouMean(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing", "card.img")
	for _, args := range [][]string{
		{"flash", "--role", "wroker", "--device", missing, "--yes", "--factory", "http://127.0.0.1:1"},
		{"schematic", "--role", "wroker"},
	} {
		code, _, stderr := cliRun(t, args...)
		if code != contract.ExitUsage || !strings.Contains(stderr, `unknown profile "wroker" (did you mean worker?`) {
			t.Errorf("%q: exit %d:\n%s", args, code, stderr)
		}
	}
}

// Issue 39: the Newt warning of a three-card flash comes with the control
// plane's image lines, before the worker's image line, not after it.
func TestNewtWarningWithItsImage(t *testing.T) {
	srv, _, _ := clusterFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	args := []string{"--flash", "--inventory", inv, "--yes", "--create-file", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}
	for _, h := range testkit.Hostnames {
		args = append(args, "--hostname", h, "--device", filepath.Join(dir, h+".img"))
	}
	code, _, stderr := cliRun(t, args...)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cpLine := strings.Index(stderr, "image: profile controlplane")
	newt := strings.Index(stderr, "this image includes siderolabs/newt")
	workerLine := strings.Index(stderr, "image: profile worker")
	if cpLine < 0 || newt < 0 || workerLine < 0 || !(cpLine < newt && newt < workerLine) {
		t.Fatalf("the Newt warning (at %d) is not between the control plane's image line (%d) and the worker's (%d):\n%s", newt, cpLine, workerLine, stderr)
	}
}

// A profile's overlay options show in schematic's output (the YAML as the
// factory stores it, and named below it) and in profiles --json.
func TestSchematicShowsOverlayOptions(t *testing.T) {
	profiles := testkit.WriteFile(t, t.TempDir(), "profiles.yaml", `profiles:
  - name: nvme-worker
    board: rpi5
    overlay:
      options:
        configTxtAppend: |-
          dtparam=pciex1
          dtparam=pciex1_gen=3
`)
	code, stdout, stderr := cliRun(t, "schematic", "--role", "nvme-worker", "--profiles", profiles)
	want := `overlay:
    image: siderolabs/sbc-raspberrypi
    name: rpi_5
    options:
        configTxtAppend: |-
            dtparam=pciex1
            dtparam=pciex1_gen=3
customization: {}
# board: rpi5 (Raspberry Pi 5, overlay rpi_5)
# overlay options: configTxtAppend (written to the card's config.txt by the overlay)
# id: 5eb48915ff693f7f7727071e108c99fef0bd3a5137746fa2f0b8db22d1a3bea3
`
	if code != contract.ExitOK || !strings.HasPrefix(stdout, want) {
		t.Fatalf("exit %d\n%s%s\nwant it to start:\n%s", code, stdout, stderr, want)
	}
	code, stdout, _ = cliRun(t, "profiles", "--profiles", profiles, "--json")
	if code != contract.ExitOK || !strings.Contains(stdout, `"name":"nvme-worker","board":"rpi5"`) || !strings.Contains(stdout, `"options":["configTxtAppend"]`) {
		t.Fatalf("profiles --json: %s", stdout)
	}
}
