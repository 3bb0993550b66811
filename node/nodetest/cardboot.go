package nodetest

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/siderolabs/talos/pkg/machinery/extensions"
)

// CardPort is the port a node booted from a card listens on when Options.Addr
// names none: the Talos API port.
const CardPort = 50000

// bootFromCard fills opts from the card at opts.Card as a node booted from
// it would be: listening at the address META 0x0a gives it (loopback only:
// a fake must never be reachable from the network), with its hostname, and
// reporting the image the card holds. Options.Addr may give the port
// ("127.0.0.1:0": any); its host is replaced by the card's address.
//
// The booted schematic: a real node has it in its initramfs (the factory
// bakes it in) and reports it as the "schematic" extension; a test card
// holds a made-up image, so the fake takes the schematic ID talosflash
// recorded under META 0x0e (CardRecord). Options.Schematic, if set, must be
// that schematic (the fake then also serves its extensions and YAML).
func bootFromCard(opts *Options) (*CardAtBoot, error) {
	card, err := ReadCardAtBoot(opts.Card)
	if err != nil {
		return nil, err
	}

	if !card.Address.IsValid() {
		return nil, fmt.Errorf("card %s: no address in META 0x0a (a real node would use DHCP)", opts.Card)
	}

	ip := card.Address.Addr()
	if !netip.MustParsePrefix("127.0.0.0/8").Contains(ip) {
		return nil, fmt.Errorf("card %s: address %s is outside 127.0.0.0/8: a fake node serves only on loopback", opts.Card, card.Address)
	}

	port := strconv.Itoa(CardPort)
	if opts.Addr != "" {
		_, p, err := net.SplitHostPort(opts.Addr)
		if err != nil {
			return nil, fmt.Errorf("Options.Addr %q: %w", opts.Addr, err)
		}

		port = p
	}

	opts.Addr = net.JoinHostPort(ip.String(), port)

	if card.Hostname != "" {
		opts.Hostname = card.Hostname
	}

	rec := card.Record
	if rec == nil {
		return card, nil // not flashed by talosflash: the image's identity is unknown
	}

	if opts.TalosVersion == "" {
		opts.TalosVersion = rec.TalosVersion
	}

	switch {
	case opts.Schematic != nil:
		if id, err := opts.Schematic.ID(); err != nil || id != rec.Schematic {
			return nil, fmt.Errorf("card %s holds schematic %q, Options.Schematic is %q", opts.Card, rec.Schematic, id)
		}
	case opts.ExtensionStatuses == nil && rec.Schematic != "":
		opts.ExtensionStatuses = []extensions.Metadata{{Name: "schematic", Version: rec.Schematic, Description: "Image Factory schematic"}}
	}

	return card, nil
}

// BootedHostname is the hostname the node reports.
func (s *Server) BootedHostname() string { return s.opts.Hostname }
