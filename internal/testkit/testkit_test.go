package testkit_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

// The kit's inventory loads with every file check passing (configs, their
// roles, the endpoint is cp-1's), at the addresses it says.
func TestInventoryLoads(t *testing.T) {
	for _, kit := range []testkit.Inventory{{Configs: true}, {First: "127.0.0.31"}} {
		inv, err := inventory.Load(kit.Write(t, t.TempDir()), inventory.Options{})
		if err != nil {
			t.Fatalf("%+v: %v", kit, err)
		}
		ips := kit.IPs()
		if len(inv.Nodes) != 3 {
			t.Fatalf("%d nodes", len(inv.Nodes))
		}
		for i, n := range inv.Nodes {
			if n.Hostname != testkit.Hostnames[i] || n.Address.Addr().String() != ips[i] || (n.Config != "") != kit.Configs {
				t.Errorf("node %d: %+v, want %s at %s", i, n, testkit.Hostnames[i], ips[i])
			}
		}
	}
}

// A card image has an empty META partition that the library can write.
func TestTalosCardHasMETA(t *testing.T) {
	st, err := meta.ReadStorePath(testkit.TalosCard(t, "card.img"))
	if err != nil || !st.Status.Blank {
		t.Fatalf("%+v %v", st, err)
	}
}

// FreePort is free on every host asked; ClosedAddr refuses a dial.
func TestPorts(t *testing.T) {
	hosts := []string{"127.0.0.1", "127.0.0.2"}
	port := testkit.FreePort(t, hosts...)
	for _, h := range hosts {
		l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("%s:%d: %v", h, port, err)
		}
		l.Close()
	}
	if c, err := net.Dial("tcp", testkit.ClosedAddr(t)); err == nil {
		c.Close()
		t.Fatal("a closed address answered")
	}
}
