package imaging

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"
)

// Runs under Wine (scripts/wine-test.sh): a handle opened unbuffered is
// reported as direct, a normal one is not.
func TestSetDirectReportsUnbufferedHandles(t *testing.T) {
	dir, err := os.MkdirTemp("", "talosflash-direct")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "card.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := setDirect(f.Fd(), true); !errors.Is(err, errNoDirect) {
		t.Errorf("buffered file: setDirect = %v, want errNoDirect", err)
	}
	p, _ := windows.UTF16PtrFromString(path)
	h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_NO_BUFFERING|windows.FILE_FLAG_WRITE_THROUGH, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	if err := setDirect(uintptr(h), true); err != nil {
		t.Errorf("unbuffered handle: setDirect = %v, want nil", err)
	}
}
