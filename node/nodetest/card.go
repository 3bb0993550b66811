package nodetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	yaml4 "go.yaml.in/yaml/v4"

	"github.com/talosflash/talosflash/imaging/gpt"
)

// CardAtBoot is what a Talos node would take from a card at boot, before any
// machine config: the network config its metal platform reads from META
// key 0x0a.
type CardAtBoot struct {
	Hostname string       // "" if META sets none (Talos would make one up)
	Address  netip.Prefix // invalid if META sets none (Talos would use DHCP)
	Link     string       // the address's link
	Gateway  netip.Addr   // default route, if any
	DNS      []netip.Addr
	// Network is the whole decoded value (nil without key 0x0a).
	Network *network.PlatformConfigSpec
	// METACopy is the ADV copy that was used: 1, 2, or 0 (none valid).
	METACopy int
	// Record is talosflash's note under META 0x0e (nil: none, or not
	// talosflash's): which image the card holds (cardrecord.go).
	Record *CardRecord
}

// ReadCardAtBoot reads a card image or device the way Talos does at boot: the
// GPT partition labelled META, its "talos" ADV (copy 1, else copy 2, each
// checked by its magics and SHA-256), and key 0x0a decoded into Talos's
// own PlatformConfigSpec with the YAML library its metal platform uses.
// The ADV reader here is its own, not imaging/meta's, so a fake node booted
// from a card checks what talosflash wrote. Reads are bounded: the table
// and the 512 KiB ADV.
func ReadCardAtBoot(path string) (*CardAtBoot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}

	tab, err := gpt.Read(f, size)
	if err != nil {
		return nil, fmt.Errorf("card %s: %w", path, err)
	}

	part, ok := tab.Find("META")
	if !ok {
		return nil, fmt.Errorf("card %s: no META partition (partitions %v)", path, tab.Labels())
	}

	const copyLen = 256 << 10
	if part.Size < 2*copyLen {
		return nil, fmt.Errorf("card %s: META is %d bytes", path, part.Size)
	}

	area := make([]byte, 2*copyLen)
	if _, err := f.ReadAt(area, part.Offset); err != nil {
		return nil, fmt.Errorf("card %s: read META: %w", path, err)
	}

	card := &CardAtBoot{}

	var value []byte

	for i := range 2 {
		if v, found, ok := advLookup(area[i*copyLen:(i+1)*copyLen], 0x0a); ok {
			card.METACopy = i + 1
			if found {
				value = v
			}

			if rec, found, _ := advLookup(area[i*copyLen:(i+1)*copyLen], 0x0e); found {
				card.Record = parseCardRecord(rec)
			}

			break
		}
	}

	if value == nil {
		return card, nil
	}

	var spec network.PlatformConfigSpec
	if err := yaml4.Unmarshal(value, &spec); err != nil {
		return nil, fmt.Errorf("card %s: META 0x0a: %w", path, err)
	}

	card.Network = &spec

	if len(spec.Hostnames) > 0 {
		card.Hostname = spec.Hostnames[0].FQDN()
	}

	for _, a := range spec.Addresses {
		card.Address, card.Link = a.Address, a.LinkName
		break
	}

	for _, r := range spec.Routes {
		if !r.Destination.IsValid() || r.Destination.Bits() == 0 {
			card.Gateway = r.Gateway
			break
		}
	}

	for _, r := range spec.Resolvers {
		card.DNS = append(card.DNS, r.DNSServers...)
	}

	return card, nil
}

// advLookup checks one ADV copy and returns key's value; ok is false when
// the copy is invalid.
func advLookup(c []byte, key uint8) (value []byte, found, ok bool) {
	if binary.BigEndian.Uint32(c) != 0x5a4b3c2d || binary.BigEndian.Uint32(c[len(c)-4:]) != 0xa5b4c3d2 {
		return nil, false, false
	}

	sum := append([]byte(nil), c[len(c)-36:len(c)-4]...)
	z := append([]byte(nil), c...)
	copy(z[len(z)-36:len(z)-4], make([]byte, 32))

	if h := sha256.Sum256(z); !bytes.Equal(h[:], sum) {
		return nil, false, false
	}

	data := c[4 : len(c)-36]
	for len(data) >= 8 {
		tag := binary.BigEndian.Uint32(data)
		if tag == 0 {
			break
		}

		n := binary.BigEndian.Uint32(data[4:])
		if uint64(n)+8 > uint64(len(data)) {
			return nil, false, false
		}

		if uint8(tag) == key {
			value, found = data[8:8+n], true // the last one wins, as in Talos
		}

		data = data[8+n:]
	}

	return value, found, true
}
