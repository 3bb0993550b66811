package plan

import (
	"net/netip"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// testMember is an inventory member: hostname, role, the built-in profile
// of that name ("" none) and its endpoint (host:port).
func testMember(t testing.TB, hostname string, role node.Role, profile, endpoint string) *Member {
	t.Helper()
	ep, err := node.ParseEndpoint(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	entry := &inventory.Node{Hostname: hostname, Role: role, Profile: profile}
	if a := ep.Addr(); a.IsValid() {
		entry.Address = netip.PrefixFrom(a, 8)
	}
	m := &Member{Hostname: hostname, Role: role, Endpoint: ep, Entry: entry}
	if profile != "" {
		p, err := factory.FindProfile(factory.BuiltinProfiles(), profile)
		if err != nil {
			p = factory.Profile{Name: profile}
		}
		m.Profile = &p
	}
	return m
}
