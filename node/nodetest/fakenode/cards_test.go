package main

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// --card a,b --card c: one node per card, flags after it for the last;
// each boots at its card's address with its hostname and the profile's
// whole schematic (extensions too) when the recorded ID is a known one.
func TestCardNodes(t *testing.T) {
	cp, _ := factory.BuiltinProfiles()[0].SchematicID()
	var cards []string
	for i, h := range []string{"cp-1", "worker-1"} {
		path := testkit.TalosCard(t, h+".img")
		n := inventory.Node{Hostname: h, Profile: "controlplane", Address: netip.MustParsePrefix("127.0.0." + []string{"31", "32"}[i] + "/8"), Interface: "end0"}
		tags, _ := n.CardTags(inventory.Record{Schematic: cp, TalosVersion: "v1.14.5"})
		if _, err := meta.WriteTagsPath(path, tags); err != nil {
			t.Fatal(err)
		}
		cards = append(cards, path)
	}
	specs, _, err := parseArgs([]string{"--card", cards[0] + "," + cards[1], "--card", cards[1], "--hostname", "renamed"})
	if err != nil || len(specs) != 3 || specs[0].card != cards[0] || specs[1].card != cards[1] || specs[2].hostname != "renamed" || specs[1].hostname != "" {
		t.Fatalf("%+v %v", specs, err)
	}
	opts, err := options(specs[0], factory.BuiltinProfiles(), 0)
	if err != nil || opts.Schematic == nil || opts.Card != cards[0] {
		t.Fatalf("%+v %v", opts, err)
	}
	opts.Addr = "127.0.0.1:0" // any port for the test; the card gives the host
	srv, err := nodetest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := node.Probe(ctx, srv.Addr())
	if err != nil || !strings.HasPrefix(srv.Addr(), "127.0.0.31:") || got.Hostname != "cp-1" || got.Booted == nil || got.Booted.SchematicID != cp || len(got.Booted.Extensions) == 0 {
		t.Fatalf("probe %s: %+v %v", srv.Addr(), got, err)
	}
}

// --boot-config: on for card nodes unless turned off, off for --listen
// nodes unless turned on.
func TestBootConfigDefaults(t *testing.T) {
	for _, c := range []struct {
		args       []string
		card, list bool
	}{
		{nil, true, false},
		{[]string{"--boot-config"}, true, true},
		{[]string{"--boot-config=false"}, false, false},
	} {
		if _, _, err := parseArgs(c.args); err != nil {
			t.Fatal(err)
		}
		if got := (spec{card: "x.img"}).bootsConfig(); got != c.card {
			t.Errorf("%v: card node boot config %v", c.args, got)
		}
		opts, err := options(spec{listen: "127.0.0.1:0", talos: "v1.14.5", image: "none"}, factory.BuiltinProfiles(), 0)
		if err != nil || opts.BootConfig != c.list {
			t.Errorf("%v: --listen node boot config %v (%v)", c.args, opts.BootConfig, err)
		}
	}
	if _, _, err := parseArgs(nil); err != nil {
		t.Fatal(err)
	}
}

// --configured-talosconfig with --card: each configured node at its card's
// address with its card's hostname (the platform layer a config's
// `auto: stable` leaves alone) and the role talosflash recorded, not all
// "talos-cp-1" at --listen's address.
func TestConfiguredCardNodesKeepTheirCards(t *testing.T) {
	cpID, _ := factory.BuiltinProfiles()[0].SchematicID()
	var cards []string
	hosts := map[string]string{"cp-1": "controlplane", "worker-1": "worker"}
	for i, h := range []string{"cp-1", "worker-1"} {
		path := testkit.TalosCard(t, h+".img")
		n := inventory.Node{Hostname: h, Profile: hosts[h], Address: netip.MustParsePrefix("127.0.0." + []string{"33", "34"}[i] + "/8"), Interface: "end0"}
		tags, _ := n.CardTags(inventory.Record{Schematic: cpID, TalosVersion: "v1.14.4", Profile: hosts[h]})
		if _, err := meta.WriteTagsPath(path, tags); err != nil {
			t.Fatal(err)
		}
		cards = append(cards, path)
	}
	port := testkit.FreePort(t, "127.0.0.33", "127.0.0.34")
	specs, _, err := parseArgs([]string{"--card", cards[0] + "," + cards[1], "--listen", "127.0.0.1:" + strconv.Itoa(port)})
	if err != nil {
		t.Fatal(err)
	}
	// --listen after the cards gives the port of a node of its own: drop it,
	// keep the port for the cards.
	specs = specs[:2]
	for i := range specs {
		specs[i].listen = "127.0.0.1:" + strconv.Itoa(port)
	}
	nodes, err := startConfigured(specs, factory.BuiltinProfiles(), t.TempDir()+"/talosconfig")
	for _, n := range nodes {
		defer n.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ addr, host string }{{"127.0.0.33", "cp-1"}, {"127.0.0.34", "worker-1"}} {
		n := nodes[i]
		if n.Addr() != want.addr+":"+strconv.Itoa(port) || n.CurrentHostname() != want.host || n.RunningVersion() != "v1.14.4" {
			t.Errorf("node %d: %s %q %s, want %s %q v1.14.4", i, n.Addr(), n.CurrentHostname(), n.RunningVersion(), want.addr, want.host)
		}
	}
	if installCNI(nodes) != 0 {
		t.Error("a CNI installed in clusters that do not run")
	}
}

// --cni: card and --listen nodes install a CNI as soon as their cluster's
// API runs.
func TestCNIFlag(t *testing.T) {
	t.Cleanup(func() { cni = false })
	specs, _, err := parseArgs([]string{"--cni", "--listen", "127.0.0.1:0"})
	if err != nil || !cni {
		t.Fatalf("--cni: %v %v", cni, err)
	}
	opts, err := options(specs[0], factory.BuiltinProfiles(), 0)
	if err != nil || !opts.CNI {
		t.Fatalf("options: %+v %v", opts, err)
	}
}
