package devices

import (
	"strings"
	"testing"
	"unicode"
)

// hostileText is what a card reader may report as its model (SCSI INQUIRY
// bytes reach sysfs as they are) or a card's filesystem label may name
// its automount point after.
const hostileText = "\x1b[2J\x1b[HNode: evil\u202e"

func rawControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf) {
			return true
		}
	}
	return false
}

// The disk's description, its one-line summary and every refusal that
// quotes a model or a mount point show them escaped: `talosflash devices`
// printed a loop device's backing file name (a reader's model the same
// way) with its escapes, and the refusals quoted it. Vendor and Model keep
// the data as it is.
func TestHardwareAndCardTextEscaped(t *testing.T) {
	d := &Disk{Name: "sdx", Path: "/dev/sdx", Vendor: "Generic", Model: hostileText, Transport: TransportSATA, Size: 1 << 30, SizeHuman: "1 GiB"}
	mounted := &Disk{Name: "sdy", Path: "/dev/sdy", Model: "Reader", Transport: TransportUSB, Removable: true, Size: 1 << 30, SizeHuman: "1 GiB",
		Mounts: []Mount{{Point: "/mnt/" + hostileText, FSType: "vfat"}}}
	for what, s := range map[string]string{
		"Description":        d.Description(),
		"String":             d.String(),
		"not removable":      d.Assess(0, Options{}).Msg,
		"mounted elsewhere":  mounted.Assess(0, Options{}).Msg,
		"not removable, err": d.Assess(0, Options{}).Error(),
	} {
		if rawControl(s) || !strings.Contains(s, `\x1b[2J`) {
			t.Errorf("%s: %q", what, s)
		}
	}
	if d.Model != hostileText {
		t.Errorf("Model changed: %q", d.Model)
	}
}
