package plan

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// standIn is a stand-in for the elevated child: sh running script once it
// has read the whole image stream for fx (as the real child reads it all
// before it reports a card), with @SHA@ and @BYTES@ in script replaced by
// the image's SHA-256 and size, which is what a card written from that
// stream holds.
func standIn(fx *imagetest.Fixture, script string) *exec.Cmd {
	script = strings.NewReplacer("@SHA@", fx.SHA256, "@BYTES@", fmt.Sprint(len(fx.Raw))).Replace(script)
	return exec.Command("sh", "-c", fmt.Sprintf("head -c %d >/dev/null\n%s", elevate.StreamLength(int64(len(fx.Raw))), script))
}
