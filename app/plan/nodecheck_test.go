package plan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/extensions"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

const (
	cpID     = "29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d"
	workerID = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
)

// docs/FLASH.md's custom worker profile.
var storage = factory.Profile{Name: "storage", Overlay: schematic.Overlay{Image: factory.RPiOverlayImage, Name: factory.RPiOverlayName},
	Extensions: []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"}}

func profiles() []factory.Profile { return append(factory.BuiltinProfiles(), storage) }

func bootedNode(s *schematic.Schematic, version string) *node.Node {
	id, _ := factory.SchematicID(s)
	b := &node.Booted{SchematicID: id, Schematic: s, Overlay: s.Overlay.Image}
	for _, e := range s.Customization.SystemExtensions.OfficialExtensions {
		b.Extensions = append(b.Extensions, e[strings.LastIndex(e, "/")+1:])
	}
	return &node.Node{Addr: "192.168.1.51:50000", TalosVersion: version, Booted: b}
}

func TestRoleOf(t *testing.T) {
	for name, want := range map[string]node.Role{"controlplane": node.RoleControlPlane, "worker": node.RoleWorker, "init": node.RoleInit, "storage": node.RoleUnknown, "Worker": node.RoleWorker} {
		if got := RoleOf(factory.Profile{Name: name}); got != want {
			t.Errorf("RoleOf(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestNodeCheckUsesWhatTheNodeBooted(t *testing.T) {
	cp := profile(t, "controlplane").Schematic()
	nc := NodeCheck{Profiles: profiles(), Factory: factory.NewClient("http://127.0.0.1:8080", nil), Node: bootedNode(cp, "v1.14.4"), Declared: "worker"}
	opts, err := nc.Options(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Booted == nil || opts.Flashed != nil || opts.Role != "" || opts.Node != "192.168.1.51" {
		t.Errorf("opts = %+v", opts)
	}
	// registry host from the factory client, version from the node
	if opts.Installer != "127.0.0.1:8080/metal-installer/"+cpID+":v1.14.4" {
		t.Errorf("installer %q", opts.Installer)
	}
	if m := nc.MatchBooted(); m.Profile != "controlplane" || m.Source != "profile" {
		t.Errorf("match %+v", m)
	}
	if note := nc.DeclaredNote(); !strings.Contains(note, "you declared worker") || !strings.Contains(note, "profile controlplane") {
		t.Errorf("note %q", note)
	}
}

// Custom profiles map to no role: `--role storage` with a worker config is
// no role mismatch (it was: the profile name was taken as a role).
func TestNodeCheckCustomProfileRole(t *testing.T) {
	nc := NodeCheck{Profiles: profiles(), Node: &node.Node{Addr: "10.0.0.5:50000"}, Declared: "storage"}
	opts, err := nc.Options(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Role != "" || opts.Flashed == nil || !strings.Contains(opts.Fallback, "storage") {
		t.Fatalf("opts = %+v", opts)
	}
	cfg, err := node.LoadConfig(testkit.Testdata(t, "worker.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range node.InspectWith(cfg, opts) {
		if f.Code == node.CodeRoleMismatch {
			t.Fatalf("storage profile blocks a worker config: %+v", f)
		}
	}
	if !strings.Contains(nc.DeclaredNote(), "fallback") {
		t.Errorf("note %q", nc.DeclaredNote())
	}
	// booted storage image: matched by the profile, still no role
	nc.Node, nc.Declared = bootedNode(storage.Schematic(), ""), ""
	if m := nc.MatchBooted(); m.Profile != "storage" || m.Role != "" {
		t.Errorf("match %+v", m)
	}
}

func TestCachedSchematicIDs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{cpID + "/v1.14.5", "not-an-id", workerID} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ids := CachedSchematicIDs(&imaging.Cache{Dir: dir})
	if len(ids) != 2 {
		t.Fatalf("legacy layout: ids %v", ids)
	}
	// The layout keyed by factory; a symlinked factory directory is not
	// followed, an ID cached from two factories is listed once.
	storageID := strings.Repeat("5", 64)
	for _, d := range []string{"factory.talos.dev/" + cpID + "/v1.14.5", "127.0.0.1_8080-0a1b2c3d/" + storageID + "/v1.14.5", "127.0.0.1_8080-0a1b2c3d/" + cpID} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := t.TempDir()
	if err := os.MkdirAll(filepath.Join(elsewhere, strings.Repeat("e", 64)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "linked-factory")); err != nil {
		t.Fatal(err)
	}
	ids = CachedSchematicIDs(&imaging.Cache{Dir: dir})
	slices.Sort(ids)
	if want := []string{cpID, storageID, workerID}; !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	other := &schematic.Schematic{Overlay: schematic.Overlay{Image: "x/y", Name: "z"}}
	n := bootedNode(other, "")
	n.Booted.SchematicID = cpID // an ID only the cache knows (no profiles given)
	if m := (NodeCheck{CachedIDs: ids, Node: n}).MatchBooted(); m.Source != "cache" || m.Label() != "flashed here" {
		t.Errorf("match %+v", m)
	}
	if CachedSchematicIDs(&imaging.Cache{Dir: filepath.Join(dir, "missing")}) != nil {
		t.Error("missing cache")
	}
}

// A node that names its schematic but not its extensions (its statuses
// hold only the factory's schematic entry, without the YAML; or only
// ImageFactorySchematics): the known schematic is evidence, so a worker
// config (no ExtensionServiceConfig for newt) to the control plane's Newt
// image is caught. Before, "no extensions" let it through.
func TestNodeCheckKnownSchematicIsEvidence(t *testing.T) {
	worker, err := node.LoadConfig(testkit.Testdata(t, "worker.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*node.Node{
		"schematic entry only":        {Addr: "127.0.0.1:50000", TalosVersion: "v1.14.5", Booted: &node.Booted{SchematicID: cpID}},
		"ImageFactorySchematics only": {Addr: "127.0.0.1:50000", TalosVersion: "v1.14.5", Factory: &node.Factory{SchematicID: cpID}},
	} {
		nc := NodeCheck{Profiles: profiles(), Node: n}
		if m := nc.MatchBooted(); m.Profile != "controlplane" {
			t.Errorf("%s: match %+v, want controlplane", name, m)
		}
		opts, err := nc.Options(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(node.InspectWith(worker, opts), func(f node.Finding) bool { return f.Code == node.CodeExtensionConfigMissing }) {
			t.Errorf("%s: no finding for newt's missing ExtensionServiceConfig", name)
		}
	}
	// A rogue node's non-ID text is not taken for a schematic.
	nc := NodeCheck{Profiles: profiles(), Node: &node.Node{Factory: &node.Factory{SchematicID: cpID + "\x1b"}}}
	if m := nc.MatchBooted(); m.Profile != "" {
		t.Errorf("rogue ID matched %+v", m)
	}
}

// The same over the wire: the fake node serves only the schematic entry
// (Talos names it by its layer index, no extension names, no YAML). The
// worker config is blocked and nothing is sent.
func TestApplyKnownSchematicBlocksWorkerConfig(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{ExtensionStatuses: []extensions.Metadata{{Name: "schematic", Version: cpID, Author: "Image Factory"}}})
	var rec recorder
	job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.Check.Declared = "worker" // a worker's card with Newt: its config needs the document (else a role mismatch)
	_, err := Apply(context.Background(), job)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Findings[0].Code != node.CodeExtensionConfigMissing {
		t.Fatalf("err %v, want blocked: newt's ExtensionServiceConfig missing", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the node got %d requests", n)
	}
}

// A Pi 5 that booted a role's rpi_5 image is that role's profile, as a Pi
// 4 is (issue 40): the identity check, the role check and the rows see it.
func TestMatchBootedEveryBoard(t *testing.T) {
	for _, role := range []string{"controlplane", "worker"} {
		p, err := factory.BuiltinProfile(role, factory.BoardRPi5)
		if err != nil {
			t.Fatal(err)
		}
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		nc := NodeCheck{Profiles: factory.BuiltinProfiles(), Node: &node.Node{Booted: &node.Booted{SchematicID: id}}}
		if m := nc.MatchBooted(); m.Profile != role || m.Role.String() != role || m.Source != "profile" {
			t.Errorf("%s on a Pi 5: matched %+v", role, m)
		}
		if sc, err := nc.resolver(t.Context())(id); err != nil || sc.Overlay.Name != factory.RPi5OverlayName {
			t.Errorf("%s on a Pi 5: resolved %v, %v", role, sc, err)
		}
	}
}
