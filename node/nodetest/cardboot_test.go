package nodetest_test

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

// nodeCard is a Talos-like image with node n's META, as flash --inventory
// writes it.
func nodeCard(t *testing.T, n inventory.Node, schematic string) string {
	t.Helper()
	path := testkit.TalosCard(t, n.Hostname+".img")
	tags, err := n.CardTags(inventory.Record{Schematic: schematic, TalosVersion: "v1.14.5"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.WriteTagsPath(path, tags); err != nil {
		t.Fatal(err)
	}
	return path
}

// A node booted from a card serves maintenance mode at the card's address
// with its hostname and the schematic the card records.
func TestBootFromCard(t *testing.T) {
	n := inventory.Node{Hostname: "worker-1", Role: "worker", Profile: "worker", Address: netip.MustParsePrefix("127.0.0.21/8"),
		Gateway: netip.MustParseAddr("127.0.0.1"), Interface: "end0"}
	id, err := factory.BuiltinProfiles()[1].SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	card := nodeCard(t, n, id)
	srv := nodetest.Start(t, nodetest.Options{Card: card, Addr: "127.0.0.1:0"})
	if !strings.HasPrefix(srv.Addr(), "127.0.0.21:") {
		t.Fatalf("listens at %s", srv.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := node.Probe(ctx, srv.Addr())
	if err != nil || got.Hostname != "worker-1" || got.Booted == nil || got.Booted.SchematicID != id || got.TalosVersion != "v1.14.5" {
		t.Fatalf("probe %+v %v", got, err)
	}

	// Outside loopback: refused, nothing listens.
	far := n
	far.Address, far.Gateway = netip.MustParsePrefix("192.168.1.21/24"), netip.MustParseAddr("192.168.1.1")
	if _, err := nodetest.New(nodetest.Options{Card: nodeCard(t, far, id)}); err == nil || !strings.Contains(err.Error(), "outside 127.0.0.0/8") {
		t.Fatalf("non-loopback card: %v", err)
	}

	// A plain image (no META node): refused, it would not have an address.
	plain := testkit.TalosCard(t, "plain.img")
	if _, err := nodetest.New(nodetest.Options{Card: plain}); err == nil || !strings.Contains(err.Error(), "DHCP") {
		t.Fatalf("plain card: %v", err)
	}
}
