package inventory

import (
	"fmt"

	"github.com/talosflash/talosflash/imaging/meta"
)

// WriteCard writes the node's network config (META key 0x0a) onto a
// flashed card or image d of size bytes: META found through the GPT, other
// tags kept, both copies written and synced, read back and compared (see
// meta.WriteTag). A card without a usable META is refused before writing.
func (n Node) WriteCard(d meta.Disk, size int64) (*meta.Written, error) {
	value, err := n.NetworkConfig()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Hostname, err)
	}

	w, err := meta.WriteTag(d, size, meta.MetalNetworkPlatformConfig, value)
	if err != nil {
		return nil, fmt.Errorf("write node %s onto the card: %w", n.Hostname, err)
	}

	return w, nil
}

// WriteCardPath is WriteCard on an image file or a device path the caller
// has already checked is safe to write (imaging/devices rules).
func (n Node) WriteCardPath(path string) (*meta.Written, error) {
	value, err := n.NetworkConfig()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Hostname, err)
	}

	w, err := meta.WriteTagPath(path, meta.MetalNetworkPlatformConfig, value)
	if err != nil {
		return nil, fmt.Errorf("write node %s onto the card: %w", n.Hostname, err)
	}

	return w, nil
}

// CardNode reads which node a card was written for: the META 0x0a value
// decoded (ok false when the card carries none).
func CardNode(c *meta.Card) (info CardInfo, ok bool, err error) {
	if c == nil || c.ADV == nil {
		return CardInfo{}, false, nil
	}

	v, ok := c.ADV.Get(meta.MetalNetworkPlatformConfig)
	if !ok {
		return CardInfo{}, false, nil
	}

	info, err = ParseNetworkConfig(v)

	return info, true, err
}
