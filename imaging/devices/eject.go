package devices

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Ejected says how a written card was made safe to remove.
type Ejected struct {
	Flushed    bool // the device's buffers were flushed again
	PoweredOff bool // UDisks2 powered the drive off (its light goes out)
	// PowerOffFailed: udisks2 was asked and refused (a partition got
	// mounted meanwhile): not safe to pull until it is unmounted.
	PowerOffFailed bool
	Note           string // what the user should know, one sentence
}

// ejectUDisks is the UDisks2 that powers cards off (tests point it at a
// fake daemon).
var ejectUDisks = &UDisks{}

// Eject makes a written card safe to remove, as Raspberry Pi Imager does:
// it flushes the device (the write already fsynced; this catches anything
// since, such as an automounter), then, where UDisks2 runs, powers the
// drive off (Drive.PowerOff over D-Bus, what `udisksctl power-off` asks).
// Nothing is unmounted by force: if a partition was automounted meanwhile
// the power-off fails and Note says what to do. Image files and loop
// devices are only flushed. Problems are reported in Note, never as
// errors: the card is written and verified.
func Eject(ctx context.Context, path string) Ejected {
	st, err := os.Stat(path)
	if err != nil {
		return Ejected{Note: fmt.Sprintf("%s is gone: the card was removed", path)}
	}
	var e Ejected
	if f, err := os.OpenFile(path, os.O_RDONLY, 0); err == nil {
		e.Flushed = f.Sync() == nil
		_ = f.Close()
	}
	switch {
	case st.Mode()&fs.ModeDevice == 0:
		e.Note = "image file: nothing to eject"
		return e
	case strings.HasPrefix(filepath.Base(path), "loop"):
		e.Note = "loop device: nothing to power off"
		return e
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = ejectUDisks.PowerOff(ctx, path)
	switch {
	case errors.Is(err, ErrNoUDisks):
		e.Note = "udisks2 is not running: safe to remove once the reader's light stops blinking"
	case err != nil:
		msg := err.Error()
		var ue *UDisksError
		if errors.As(err, &ue) {
			msg = ue.Msg
		}
		e.PowerOffFailed = true
		e.Note = "could not power the card off (" + firstLine(msg) + "): unmount it in the file manager before removing it"
	default:
		e.PoweredOff = true
		e.Note = "powered off: safe to remove"
	}
	return e
}

// firstLine is the first non-blank line of a tool's output, for a one-line note.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return ""
}
