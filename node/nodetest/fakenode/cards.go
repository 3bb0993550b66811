package main

import (
	"fmt"
	"log"
	"strconv"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// cardSpecs is one node per file of --card FILE[,FILE...].
func cardSpecs(v string) []spec {
	var specs []spec
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			specs = append(specs, spec{card: f})
		}
	}
	return specs
}

// cardOptions boots a node from a card as Talos would (nodetest.ReadCardAtBoot:
// GPT, META, key 0x0a): at its address (127.0.0.0/8 only, checked by
// nodetest), with its hostname; --listen's port if one was given, else
// 50000. The image is the one talosflash recorded on the card (META 0x0e;
// a real node knows it from its initramfs): served with the profile's full
// schematic when a known profile has that ID.
func cardOptions(sp spec, profiles []factory.Profile, i int) (nodetest.Options, error) {
	card, err := nodetest.ReadCardAtBoot(sp.card)
	if err != nil {
		return nodetest.Options{}, err
	}
	opts := nodetest.Options{
		Card:       sp.card,
		RC1Rules:   rc1Rules,
		BootConfig: sp.bootsConfig(),
		Hostname:   sp.hostname,
		CNI:        cni,
		CoreDNS:    true, // a fresh cluster's pods, for drains to evict
		MAC:        fmt.Sprintf("dc:a6:32:00:01:%02x", i+1),
		Logf:       func(f string, a ...any) { log.Printf(sp.card+": "+f, a...) },
	}
	if cardPort != 0 {
		opts.Addr = "127.0.0.1:" + strconv.Itoa(cardPort) // the host is the card's
	}
	if sp.talos != "" {
		opts.TalosVersion = sp.talos
	}
	if rec := card.Record; rec != nil {
		if p, err := factory.FindProfile(profiles, rec.Profile); err == nil {
			if id, err := p.SchematicID(); err == nil && id == rec.Schematic {
				opts.Schematic = p.Schematic()
			}
		}
		if opts.TalosVersion == "" {
			opts.TalosVersion = rec.TalosVersion
		}
	}
	if opts.TalosVersion == "" {
		opts.TalosVersion = nodetest.DefaultVersion
	}
	opts.Legacy = !node.UnifiedMaintenance(opts.TalosVersion)
	return opts, nil
}
