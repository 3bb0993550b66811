package nodetest

import "encoding/json"

// CardRecord is talosflash's record under META 0x0e (user-reserved, which
// Talos stores and never reads), decoded here on its own so that a fake
// node checks what the flash wrote: the image's schematic and Talos
// version, the profile and the node's hostname.
//
// A real node does not learn its schematic from META: it is baked into
// the initramfs the card boots (and reported by the node's version API).
// The fake reads the record because a test card holds a made-up image,
// not a bootable one; the record says which image the flash wrote.
type CardRecord struct {
	Format       string `json:"format"`
	Schematic    string `json:"schematic"`
	TalosVersion string `json:"talosVersion"`
	Profile      string `json:"profile"`
	Hostname     string `json:"hostname"`
}

func parseCardRecord(b []byte) *CardRecord {
	var r CardRecord
	if len(b) > 4<<10 || json.Unmarshal(b, &r) != nil || r.Format != "talosflash/v1" {
		return nil
	}

	return &r
}
