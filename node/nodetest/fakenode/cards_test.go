package main

import (
	"context"
	"net/netip"
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
