package plan

import (
	"fmt"
	"strings"
)

// WrongImage says the node at the address is the inventory's node (it
// answers with its hostname, written onto its card) but booted another
// profile's image: its own card flashed with the wrong image, not a
// swapped card. The fix is to flash that card again, not the config.
func (e *IdentityError) WrongImage() bool {
	return e.hostOK && e.BootedProfile != "" && !strings.EqualFold(e.BootedProfile, e.Want.ProfileName())
}

// Fix is what the user does about the refusal.
func (e *IdentityError) Fix() string {
	if e.WrongImage() {
		return fmt.Sprintf("flash %s's card again with the %s image", e.Want.Hostname, e.Want.ProfileName())
	}
	return "put each card in its own Pi (`talosflash card DEVICE` says which node a card is for)"
}
