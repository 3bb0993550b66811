// Package humanbytes is the one way talosflash says a byte count to people:
// in binary units with the exact count beside it ("108 MiB (113246208
// bytes)"), so a message reads at a glance and still says exactly how far
// something got.
package humanbytes

import (
	"strconv"

	"github.com/dustin/go-humanize"
)

// Exact is n in binary units with the exact count beside it: "108 MiB
// (113246208 bytes)"; under 1 KiB only the count ("720 bytes", "1 byte").
func Exact(n int64) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1024:
		return strconv.FormatInt(n, 10) + " bytes"
	}
	return humanize.IBytes(uint64(n)) + " (" + strconv.FormatInt(n, 10) + " bytes)"
}
