package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
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
			return nodes, fmt.Errorf("%s: %w", sp.name(), err)
		}
		no := nodetest.NodeOptions{
			Addr: sp.listen, PKI: pki, TalosVersion: opts.TalosVersion, Schematic: opts.Schematic, Hostname: opts.Hostname,
			Worker: !strings.EqualFold(sp.image, "controlplane"), UnhealthyPolls: 2, Logf: opts.Logf, CNI: cni, CoreDNS: true,
		}
		if sp.card != "" {
			if err := cardNode(sp, &no); err != nil {
				return nodes, fmt.Errorf("%s: %w", sp.name(), err)
			}
		}
		n, err := nodetest.NewNode(no)
		if err != nil {
			return nodes, fmt.Errorf("%s: %w", sp.name(), err)
		}
		nodes = append(nodes, n)
		host, _, _ := net.SplitHostPort(n.Addr())
		hosts = append(hosts, host)
		role := "controlplane"
		if no.Worker {
			role = "worker"
		}
		log.Printf("node %s: configured %s %q, Talos %s (client certificate required)", n.Addr(), role, n.CurrentHostname(), no.TalosVersion)
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

// cardNode places a configured node booted from a card as a maintenance one
// would be (nodetest.ReadCardAtBoot): at the card's address (loopback only)
// on --listen's port or 50000, with the card's hostname (its platform
// layer: a config's `auto: stable` does not replace it) and, from
// talosflash's record, its Talos version and role.
func cardNode(sp spec, no *nodetest.NodeOptions) error {
	card, err := nodetest.ReadCardAtBoot(sp.card)
	if err != nil {
		return err
	}
	if !card.Address.IsValid() || !card.Address.Addr().IsLoopback() {
		return fmt.Errorf("the card's address %v is not a loopback address: a fake serves only on 127.0.0.0/8", card.Address)
	}
	port := strconv.Itoa(nodetest.CardPort)
	if cardPort != 0 {
		port = strconv.Itoa(cardPort)
	}
	if sp.listen != "" {
		if _, p, err := net.SplitHostPort(sp.listen); err == nil {
			port = p
		}
	}
	no.Addr = net.JoinHostPort(card.Address.Addr().String(), port)
	if card.Hostname != "" {
		no.Hostname = card.Hostname
	}
	if rec := card.Record; rec != nil {
		no.Worker = rec.Profile != "controlplane"
		if sp.talos == "" && rec.TalosVersion != "" {
			no.TalosVersion = rec.TalosVersion
		}
	}
	return nil
}
