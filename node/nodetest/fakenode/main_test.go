package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

func TestParseArgsGroupsFlagsPerNode(t *testing.T) {
	specs, _, err := parseArgs(strings.Fields("--talos v1.13.2 --listen 127.0.0.2:50000 --image controlplane --listen 127.0.0.3:50000 --talos v1.12.6 --image none --hostname old"))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].talos != "v1.13.2" || specs[0].image != "controlplane" ||
		specs[1].talos != "v1.12.6" || specs[1].image != "none" || specs[1].hostname != "old" {
		t.Fatalf("specs %+v", specs)
	}
	if specs, _, err := parseArgs(nil); err != nil || len(specs) != 1 || specs[0].listen != "127.0.0.2:50000" || specs[0].image != "worker" {
		t.Fatalf("defaults %+v %v", specs, err)
	}
}

func TestOptionsLoopbackOnlyAndGenerations(t *testing.T) {
	if _, err := options(spec{listen: "192.168.1.5:50000", talos: "v1.14.5", image: "worker"}, factory.BuiltinProfiles(), 0); err == nil {
		t.Fatal("a non-loopback address was accepted")
	}
	if _, err := options(spec{listen: "127.0.0.2:50000", talos: "v1.14.5", image: "storage"}, factory.BuiltinProfiles(), 0); err == nil {
		t.Fatal("an unknown profile was accepted")
	}
	opts, err := options(spec{listen: "127.0.0.1:0", talos: "v1.12.6", image: "none"}, factory.BuiltinProfiles(), 1)
	if err != nil || !opts.Legacy || opts.Schematic != nil {
		t.Fatalf("1.12 node: %+v %v", opts, err)
	}
	opts, err = options(spec{listen: "127.0.0.1:0", talos: "v1.14.5", image: "controlplane"}, factory.BuiltinProfiles(), 0)
	if err != nil || opts.Legacy || opts.Schematic == nil {
		t.Fatalf("1.14 node: %+v %v", opts, err)
	}
	srv, err := nodetest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil || n.Booted == nil || !n.Booted.HasExtension(factory.NewtExtension) || n.Hostname != opts.Hostname {
		t.Fatalf("probe: %+v %v", n, err)
	}
}

// The fake plays a rogue device too: any hostname and version text is
// served byte for byte (talosflash must escape it, not the fake).
func TestOptionsServeHostileValuesVerbatim(t *testing.T) {
	host, ver := "evil\x1b[2J\r\nfake-row", "v1.14.5\x1b[31m"
	specs, _, err := parseArgs([]string{"--listen", "127.0.0.1:0", "--hostname", host, "--talos", ver})
	if err != nil || len(specs) != 1 {
		t.Fatalf("%+v %v", specs, err)
	}
	opts, err := options(specs[0], factory.BuiltinProfiles(), 0)
	if err != nil || opts.Hostname != host || opts.TalosVersion != ver {
		t.Fatalf("%+v %v", opts, err)
	}
	srv, err := nodetest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.TalosVersion() != ver {
		t.Fatalf("serves %q", srv.TalosVersion())
	}
}

func TestConfiguredNodesAndTheirTalosconfig(t *testing.T) {
	path := t.TempDir() + "/talosconfig"
	nodes, err := startConfigured([]spec{{listen: "127.0.0.1:0", talos: "v1.14.5", image: "controlplane"}}, factory.BuiltinProfiles(), path)
	for _, n := range nodes {
		defer n.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	tc, err := node.LoadTalosconfig(path, "")
	if err != nil || !tc.IsAdmin() {
		t.Fatalf("talosconfig: %v", err)
	}
	res, err := node.Bootstrap(context.Background(), nodes[0].Addr(), tc, node.WaitOptions{Every: 10 * time.Millisecond})
	if err != nil || !res.EtcdHealthy || !nodes[0].Bootstrapped() {
		t.Fatalf("bootstrap: %+v %v", res, err)
	}
	more, err := startConfigured([]spec{{listen: "127.0.0.1:0", talos: "v1.14.5", image: "worker"}}, factory.BuiltinProfiles(), path)
	for _, n := range more {
		n.Close()
	}
	if err == nil {
		t.Fatal("an existing talosconfig was overwritten")
	}
}

func TestRC1RulesFlag(t *testing.T) {
	rc1Rules = false
	t.Cleanup(func() { rc1Rules = false })
	if _, _, err := parseArgs([]string{"--rc1-rules", "--listen", "127.0.0.1:0"}); err != nil || !rc1Rules {
		t.Fatalf("--rc1-rules: %v %v", rc1Rules, err)
	}
	opts, err := options(spec{listen: "127.0.0.1:0", talos: "v1.14.5", image: "worker"}, factory.BuiltinProfiles(), 0)
	if err != nil || !opts.RC1Rules {
		t.Fatalf("options: %+v %v", opts, err)
	}
}

// The "try:" line finds every node it started: fakenode --card boots at
// the cards' addresses (e.g. 127.0.0.20-22), not only 127.0.0.2-4.
func TestScanHintCoversEveryNode(t *testing.T) {
	for _, addrs := range [][]string{
		{"127.0.0.2:50000", "127.0.0.3:50000", "127.0.0.4:50000"},
		{"127.0.0.20:50000", "127.0.0.21:50000", "127.0.0.22:50000"},
		{"127.0.0.21:50000"},
		{"127.0.0.7:50000", "127.0.0.8:50000"},
		{"127.0.0.2:50000", "127.0.1.200:50000"},
	} {
		hint := scanHint(addrs)
		var cidr, port string
		if _, err := fmt.Sscanf(hint, "talosflash nodes --subnet %s --port %s", &cidr, &port); err != nil {
			t.Fatalf("%v: hint %q: %v", addrs, hint, err)
		}
		_, subnet, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatalf("%v: hint %q: %v", addrs, hint, err)
		}
		if ones, _ := subnet.Mask.Size(); ones < 22 {
			t.Errorf("%v: %s is wider than talosflash nodes scans", addrs, cidr)
		}
		for _, a := range addrs {
			h, p, _ := net.SplitHostPort(a)
			if !subnet.Contains(net.ParseIP(h)) || p != port {
				t.Errorf("%v: hint %q misses %s", addrs, hint, a)
			}
		}
	}
	if got := scanHint([]string{"127.0.0.2:50000", "127.0.0.3:50001"}); got != "" {
		t.Errorf("two ports: hint %q, want none", got)
	}
	if got := scanHint([]string{"127.0.0.2:50000", "127.0.0.3:50000", "127.0.0.4:50000"}); got != "talosflash nodes --subnet 127.0.0.0/29 --port 50000" {
		t.Errorf("the README's three nodes: %q", got)
	}
}

// A --card node's errors name its card (it has no --listen address).
func TestCardSpecNamedByCard(t *testing.T) {
	specs, _, err := parseArgs([]string{"--card", "/tmp/worker-1.img"})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].name() != "/tmp/worker-1.img" {
		t.Fatalf("specs %+v: want one named /tmp/worker-1.img", specs)
	}
}
