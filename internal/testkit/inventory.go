package testkit

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

// Inventory is the test cluster's inventory file: cluster home, gateway
// and DNS 127.0.0.1, cp-1 (controlplane) and worker-1, worker-2 (worker)
// on three consecutive loopback addresses, /8.
type Inventory struct {
	// First is cp-1's address; worker-1 and worker-2 take the next two.
	// Default 127.0.0.21.
	First string
	// Configs names each node's config (talos/controlplane.yaml, and
	// talos/worker.yaml for both workers) and makes Write write them.
	Configs bool
}

// Hostnames are the inventory's nodes, in order.
var Hostnames = [3]string{"cp-1", "worker-1", "worker-2"}

// IPs are the nodes' addresses, in the order of Hostnames.
func (inv Inventory) IPs() [3]string {
	first := inv.First
	if first == "" {
		first = "127.0.0.21"
	}
	a := netip.MustParseAddr(first)
	var ips [3]string
	for i := range ips {
		ips[i] = a.String()
		a = a.Next()
	}
	return ips
}

// YAML is the inventory file's text.
func (inv Inventory) YAML() string {
	ips := inv.IPs()
	s := "cluster: home\ngateway: 127.0.0.1\ndns: [127.0.0.1]\nnodes:\n"
	for i, h := range Hostnames {
		role, config := "worker", "talos/worker.yaml"
		if i == 0 {
			role, config = "controlplane", "talos/controlplane.yaml"
		}
		s += fmt.Sprintf("  - hostname: %s\n    role: %s\n    address: %s/8\n", h, role, ips[i])
		if inv.Configs {
			s += "    config: " + config + "\n"
		}
	}
	return s
}

// Write writes the inventory as dir/talosflash.yaml and returns its path.
// With Configs, talos/controlplane.yaml and talos/worker.yaml beside it
// are Talos 1.14 configs as gen config writes them (node/testdata/talos114/
// valid: no static hostname, so both workers take the worker's), their
// endpoint cp-1's address (inventory check cross-checks it).
func (inv Inventory) Write(t testing.TB, dir string) string {
	t.Helper()
	if inv.Configs {
		endpoint := []byte("https://" + inv.IPs()[0] + ":6443")
		for _, f := range []string{"worker.yaml", "controlplane.yaml"} {
			data := Testdata(t, "talos114/valid/"+f)
			for _, ep := range []string{"https://192.168.1.20:6443", "https://192.168.1.10:6443"} {
				data = bytes.ReplaceAll(data, []byte(ep), endpoint)
			}
			if bytes.Contains(data, []byte("\n    hostname:")) || bytes.Contains(data, []byte("\nhostname:")) {
				t.Fatalf("testkit: %s sets a static hostname: both workers could not share it", f)
			}
			WriteFile(t, dir, "talos/"+f, data)
		}
	}
	return WriteFile(t, dir, "talosflash.yaml", inv.YAML())
}
