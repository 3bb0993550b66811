package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
)

// doorCase is one way of choosing an image on flash's command line, for
// the image of one role: the door table's rows (issue 28).
type doorCase struct {
	door string
	// args choose the image of role (controlplane or worker) in dir; nil
	// when the door cannot name it (the node default names only the node's).
	args func(t *testing.T, dir, role string) []string
}

func roleID(role string) string {
	if role == "controlplane" {
		return cpID
	}
	return workerID
}

func roleRef(role string) string {
	return "factory.talos.dev/metal-installer/" + roleID(role) + ":" + factory.DefaultTalosVersion
}

// doors are every way to choose an image; each yields the image of role.
var doors = []doorCase{
	{"role", func(_ *testing.T, _, role string) []string { return []string{"--role", role} }},
	{"profile via --profiles", func(t *testing.T, dir, role string) []string {
		// A custom profile of the role's content under another name.
		exts := ""
		if role == "controlplane" {
			exts = "\n    extensions: [siderolabs/newt]"
		}
		p := testkit.WriteFile(t, dir, "profiles-"+role+".yaml", "profiles:\n  - name: my-"+role+
			"\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}"+exts+"\n")
		return []string{"--role", "my-" + role, "--profiles", p}
	}},
	{"installer ref", func(_ *testing.T, _, role string) []string { return []string{"--installer", roleRef(role)} }},
	{"installer file", func(t *testing.T, dir, role string) []string {
		f := testkit.WriteFile(t, dir, "installer-"+role+".yaml", "machine:\n  install:\n    image: "+roleRef(role)+"\n")
		return []string{"--installer-file", f}
	}},
	{"local image recognised", func(t *testing.T, dir, role string) []string {
		// An entry of the image cache (--cache-dir below):
		// <factory>/<schematic ID>/<version>/metal-arm64.raw.xz.
		_, fx := talosFactory(t)
		p := filepath.Join(dir, "cache", "local", roleID(role), factory.DefaultTalosVersion, "metal-arm64.raw.xz")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fx.XZ, 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"--image", p}
	}},
	{"inventory node default", nil},
}

// The Newt image never reaches a worker's card, whatever the door: each
// door × each image × each inventory role, on the CLI. A pick that
// contradicts the node is refused (exit 2) naming the pick and the node,
// before anything is downloaded or touched; the node's own image passes
// and its card's record says what was written.
func TestFlashDoorTable(t *testing.T) {
	nodes := map[string]struct{ host, addr string }{
		"controlplane": {"cp-1", "127.0.0.21/8"},
		"worker":       {"worker-1", "127.0.0.22/8"},
	}
	cases := 0
	for _, d := range doors {
		for _, nodeRole := range []string{"controlplane", "worker"} {
			images := []string{"controlplane", "worker"}
			if d.args == nil {
				images = []string{nodeRole} // the node's own, the only one it names
			}
			for _, imageRole := range images {
				cases++
				n := nodes[nodeRole]
				t.Run(d.door+"/"+imageRole+" image/"+nodeRole+" node", func(t *testing.T) {
					srv, fx := talosFactory(t)
					dir := t.TempDir()
					inv := testkit.Inventory{Configs: true}.Write(t, dir)
					card := filepath.Join(dir, "card.img")
					before := bytes.Repeat([]byte("old card "), 4096)
					if err := os.WriteFile(card, before, 0o600); err != nil {
						t.Fatal(err)
					}
					args := []string{"--flash", "--inventory", inv, "--hostname", n.host, "--device", card, "--yes",
						"--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}
					if d.args != nil {
						args = append(args, d.args(t, dir, imageRole)...)
					}
					code, _, stderr := cliRun(t, args...)
					if imageRole == nodeRole {
						if code != contract.ExitOK || !strings.Contains(stderr, "Card ready: "+n.host) {
							t.Fatalf("the node's own image: exit %d: %s", code, stderr)
						}
						checkNodeCard(t, card, fx, n.host, n.addr, nodeRole, roleID(nodeRole))
						return
					}
					want := "is the " // "--role controlplane is the controlplane image (schematic …)"
					if d.door == "profile via --profiles" {
						want += "my-"
					}
					want += imageRole + " image (schematic " + roleID(imageRole)[:12] + "…); the inventory says " + n.host + " is a " + nodeRole
					if code != contract.ExitUsage || !strings.Contains(stderr, want) || strings.Contains(stderr, "Card ready") {
						t.Fatalf("exit %d, want %d with %q: %s", code, contract.ExitUsage, want, stderr)
					}
					if after, _ := os.ReadFile(card); !bytes.Equal(after, before) {
						t.Fatal("the card was touched")
					}
					if srv.BytesServed() != 0 {
						t.Fatalf("%d bytes downloaded before the refusal", srv.BytesServed())
					}
				})
			}
		}
	}
	if cases != 22 {
		t.Fatalf("%d cases, want 5 doors × 2 images × 2 node roles + 2 node defaults", cases)
	}
}

// A local image of unknown content is not labelled as the node's image:
// refused for an inventory node, naming the way to allow it; allowed
// explicitly, its card's record names no profile and no schematic.
func TestFlashInventoryUnknownLocalImage(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	img := filepath.Join(dir, "talos.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.img")
	before := bytes.Repeat([]byte("old card "), 4096)
	if err := os.WriteFile(card, before, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--flash", "--inventory", inv, "--hostname", "worker-1", "--image", img, "--device", card, "--yes", "--factory", srv.URL}
	code, _, stderr := cliRun(t, args...)
	if code != contract.ExitUsage || !strings.Contains(stderr, "--image "+img+" is of unknown content") ||
		!strings.Contains(stderr, "the inventory says worker-1 is a worker") || !strings.Contains(stderr, "--allow-unknown-image") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if after, _ := os.ReadFile(card); !bytes.Equal(after, before) {
		t.Fatal("the card was touched")
	}

	code, _, stderr = cliRun(t, append(args, "--allow-unknown-image")...)
	if code != contract.ExitOK || !strings.Contains(stderr, "names no profile") {
		t.Fatalf("--allow-unknown-image: exit %d: %s", code, stderr)
	}
	checkNodeCard(t, card, fx, "worker-1", "127.0.0.22/8", "", "")
}

// The factory's layout outside the cache names nothing: the control
// plane's (Newt) image copied under the worker's schematic ID is of unknown
// content for worker-1, refused before its card is touched (it was flashed
// as the worker image, its record saying profile worker).
func TestFlashInventoryFactoryLayoutOutsideTheCache(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	img := filepath.Join(dir, "lie", roleID("worker"), factory.DefaultTalosVersion, "metal-arm64.raw.xz")
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil { // the test factory's image, whatever its folders say
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.img")
	before := bytes.Repeat([]byte("old card "), 4096)
	if err := os.WriteFile(card, before, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "--flash", "--inventory", inv, "--hostname", "worker-1", "--image", img, "--device", card, "--yes",
		"--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitUsage || !strings.Contains(stderr, "is of unknown content") || strings.Contains(stderr, "Card ready") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if after, _ := os.ReadFile(card); !bytes.Equal(after, before) {
		t.Fatal("the card was touched")
	}
}

// An installer of a schematic known to carry Newt is refused for a worker
// even with --allow-unknown-image: that flag only lets through what cannot
// be checked.
func TestFlashInventoryForeignNewtSchematic(t *testing.T) {
	srv, _ := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	// A schematic of no profile (newt + another extension), pasted into the
	// installer file's comments as `talosflash schematic` prints it.
	p := factory.BuiltinProfiles()[0]
	p.Extensions = append(p.Extensions, "siderolabs/iscsi-tools")
	id, err := p.SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	y, err := p.Schematic().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	comments := "# " + strings.ReplaceAll(strings.TrimSpace(string(y)), "\n", "\n# ") + "\n"
	f := testkit.WriteFile(t, dir, "installer-edge.yaml", comments+"machine:\n  install:\n    image: factory.talos.dev/metal-installer/"+id+":"+factory.DefaultTalosVersion+"\n")
	card := filepath.Join(dir, "card.img")
	if err := os.WriteFile(card, []byte("old card"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "--flash", "--inventory", inv, "--hostname", "worker-1", "--installer-file", f, "--allow-unknown-image",
		"--device", card, "--yes", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitUsage || !strings.Contains(stderr, "includes siderolabs/newt, which the node's profile does not; the inventory says worker-1 is a worker") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if after, _ := os.ReadFile(card); string(after) != "old card" {
		t.Fatal("the card was touched")
	}
}
