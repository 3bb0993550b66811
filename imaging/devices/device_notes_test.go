package devices

import (
	"slices"
	"testing"
)

func TestDeviceNotes(t *testing.T) {
	got := (&Device{Unmounted: []string{"/media/u/boot"}}).Notes()
	if !slices.Equal(got, []string{"unmounted /media/u/boot before writing"}) {
		t.Fatalf("notes %q", got)
	}
}
