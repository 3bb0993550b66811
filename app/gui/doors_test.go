package gui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// appDoor is one way of choosing an image in step 1, for the image of one
// role; nil pick: the node's default (its own image, the only one it names).
type appDoor struct {
	name string
	pick func(t *testing.T, s *imageStep, dir, role string)
}

func appRoleID(t *testing.T, role string) string {
	id, err := builtin(t, role).SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func appRoleRef(t *testing.T, role string) string {
	return "factory.talos.dev/metal-installer/" + appRoleID(t, role) + ":" + factory.DefaultTalosVersion
}

var appDoors = []appDoor{
	{"role", func(_ *testing.T, s *imageStep, _, role string) { s.selectProfile(role) }},
	{"profile", func(_ *testing.T, s *imageStep, _, role string) { s.selectProfile("my-" + role) }},
	{"installer ref", func(t *testing.T, s *imageStep, _, role string) {
		s.ref.SetText(appRoleRef(t, role))
		s.useRef()
	}},
	{"installer file", func(t *testing.T, s *imageStep, _, role string) {
		s.loadInstallerFile("installer-"+role+".yaml", []byte("machine:\n  install:\n    image: "+appRoleRef(t, role)+"\n"))
	}},
	{"local image recognised", func(t *testing.T, s *imageStep, _, role string) {
		// An entry of the app's image cache: <factory>/<schematic ID>/<version>/<file>.
		p := filepath.Join(s.ui.deps.Cache.Dir, "local", appRoleID(t, role), factory.DefaultTalosVersion, "metal-arm64.raw.xz")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not read: the path names the image"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.useLocal(p)
	}},
	{"inventory node default", nil},
}

// doorsHarness is the app with an inventory (cp-1, worker-1), the built-in
// roles and a copy of each under another name (my-controlplane,
// my-worker), offline: nothing is downloaded or flashed.
func doorsHarness(t *testing.T) *harness {
	t.Helper()
	srv := factorytest.New(t)
	profiles := factory.BuiltinProfiles()
	for _, p := range factory.BuiltinProfiles() {
		p.Name = "my-" + p.Name
		profiles = append(profiles, p)
	}
	dir := t.TempDir()
	inv, err := inventory.Parse([]byte("gateway: 192.168.1.1\nnodes:\n  - hostname: cp-1\n    role: controlplane\n    address: 192.168.1.11/24\n"+
		"  - hostname: worker-1\n    role: worker\n    address: 192.168.1.21/24\n"), filepath.Join(dir, "talosflash.yaml"), dir, inventory.Options{SkipFiles: true, Profiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{
		Factory:        factory.NewClient(srv.URL, srv.Client()),
		Cache:          &imaging.Cache{Dir: filepath.Join(dir, "cache")},
		Profiles:       profiles,
		ListDevices:    func() ([]devices.Disk, error) { return nil, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
		Inventory:      inv, InventoryPort: 1, InventoryEvery: time.Hour,
		Probe: func(context.Context, string) (*node.Node, error) { return nil, context.Canceled },
	}
	ui := New(test.NewTempApp(t), deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	return &harness{t: t, ui: ui, factory: srv}
}

// The app's door table (issue 28; the CLI's is TestFlashDoorTable): each
// way to choose an image × each image × each inventory role. With a node
// picked, a pick that contradicts it is refused, naming the pick and the
// node: no choice (Next and Flash stay off), both picks stay as made; the
// node's own image is the choice, named as the node's profile, which is
// what its card's record is written from (plan.NodeCardMeta).
func TestAppDoorTable(t *testing.T) {
	nodes := map[string]string{"controlplane": "cp-1", "worker": "worker-1"}
	cases := 0
	for _, d := range appDoors {
		for _, nodeRole := range []string{"controlplane", "worker"} {
			images := []string{"controlplane", "worker"}
			if d.pick == nil {
				images = []string{nodeRole}
			}
			for _, imageRole := range images {
				cases++
				host := nodes[nodeRole]
				t.Run(d.name+"/"+imageRole+" image/"+nodeRole+" node", func(t *testing.T) {
					h := doorsHarness(t)
					dir := t.TempDir()
					h.onUI(func() {
						s := h.ui.image
						for _, o := range s.nodes.sel.Options {
							if strings.HasPrefix(o, host+" ") {
								s.nodes.sel.SetSelected(o)
							}
						}
						if d.pick != nil {
							d.pick(t, s, dir, imageRole)
						}
						if n := s.pickedNode(); n == nil || n.Hostname != host {
							t.Fatalf("the node pick was dropped: %q", s.nodes.sel.Selected)
						}
						c := h.ui.session.Choice()
						if imageRole == nodeRole {
							if c == nil || c.Profile == nil || c.Profile.Name != nodeRole || c.SchematicID != appRoleID(t, nodeRole) || s.problem.Visible() {
								t.Fatalf("the node's own image: choice %+v, problem %q", c, s.problem.Text)
							}
							return
						}
						want := "the inventory says " + host + " is a " + nodeRole
						if c != nil || !s.next.Disabled() || !s.problem.Visible() || !strings.Contains(s.problem.Text, want) ||
							!strings.Contains(s.problem.Text, appRoleID(t, imageRole)[:12]) {
							t.Fatalf("%s image for %s: choice %+v, next off %v, problem %q", imageRole, host, c, s.next.Disabled(), s.problem.Text)
						}
					})
				})
			}
		}
	}
	if cases != 22 {
		t.Fatalf("%d cases, want 5 doors × 2 images × 2 node roles + 2 node defaults", cases)
	}
}
