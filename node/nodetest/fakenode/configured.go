package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// startConfigured runs the nodes as configured ones (after apply-config:
// apid with client-certificate auth, Bootstrap, Upgrade, reboots) sharing
// one throw-away PKI, and writes an os:admin talosconfig for them to path
// (created, never overwritten, 0600). A controlplane image gets an etcd
// waiting for bootstrap; any other image is a worker.
func startConfigured(specs []spec, profiles []factory.Profile, path string) ([]*nodetest.Node, error) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		return nil, err
	}
	var (
		nodes []*nodetest.Node
		hosts []string
	)
	for i, sp := range specs {
		opts, err := options(sp, profiles, i) // loopback check, profile lookup
		if err != nil {
			return nodes, fmt.Errorf("%s: %w", sp.listen, err)
		}
		n, err := nodetest.NewNode(nodetest.NodeOptions{
			Addr: sp.listen, PKI: pki, TalosVersion: sp.talos, Schematic: opts.Schematic,
			Worker: !strings.EqualFold(sp.image, "controlplane"), UnhealthyPolls: 2, Logf: opts.Logf,
		})
		if err != nil {
			return nodes, fmt.Errorf("%s: %w", sp.listen, err)
		}
		nodes = append(nodes, n)
		host, _, _ := net.SplitHostPort(n.Addr())
		hosts = append(hosts, host)
		log.Printf("node %s: configured, Talos %s, image %s (client certificate required)", n.Addr(), sp.talos, sp.image)
	}
	data, err := pki.Talosconfig("fakenode", "os:admin", hosts...)
	if err != nil {
		return nodes, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nodes, fmt.Errorf("talosconfig: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nodes, fmt.Errorf("talosconfig: %w", err)
	}
	if err := f.Close(); err != nil {
		return nodes, fmt.Errorf("talosconfig: %w", err)
	}
	log.Printf("talosconfig for these nodes written to %s; try: talosflash bootstrap --node %s --talosconfig %s", path, nodes[0].Addr(), path)
	return nodes, nil
}
