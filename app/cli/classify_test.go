package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
)

// An image download whose server cannot be reached (e.g. --installer with
// the factory down) is a network failure (3), not an internal one (1).
func TestClassifyImageDownloadUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/image/x/v1.14.5/metal-arm64.raw.xz"
	ln.Close() // nothing listens there now: connection refused
	c := &imaging.Cache{Dir: t.TempDir(), Retries: -1}
	_, err = c.Fetch(context.Background(), http.DefaultClient, url, "x/v1.14.5/metal-arm64.raw.xz", nil)
	if err == nil {
		t.Fatal("download from a closed port succeeded")
	}
	if code := exitCode(err); code != ExitNetwork {
		t.Fatalf("exit code %d, want %d (%v)", code, ExitNetwork, err)
	}
}

// A stalled image download (retries exhausted) is a network failure.
func TestClassifyStalledDownload(t *testing.T) {
	srv := factorytest.New(t)
	srv.AddImage("x", "v1.14.5", "metal-arm64.raw.xz", bytes.Repeat([]byte{1}, 64<<10))
	srv.Inject(factorytest.ImagePath("x", "v1.14.5", "metal-arm64.raw.xz"), factorytest.Fault{Kind: factorytest.FaultStall, After: 100})
	c := &imaging.Cache{Dir: t.TempDir(), Retries: -1, IdleTimeout: 200 * time.Millisecond}
	_, err := c.Fetch(context.Background(), srv.Client(), srv.ImageURL("x", "v1.14.5", "metal-arm64.raw.xz"), "x/v1.14.5/metal-arm64.raw.xz", nil)
	if code := exitCode(err); code != ExitNetwork {
		t.Fatalf("stalled download %v: exit %d, want %d", err, code, ExitNetwork)
	}
}

// Each input and storage failure maps to the documented exit code.
func TestClassifyInputsAndStorage(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("image x: %w: it is a bzip2 file", imaging.ErrUnsupportedImage), ExitImage},
		{&imaging.CacheError{Path: "/ro/cache", Err: syscall.EROFS}, ExitStorage},
		{fmt.Errorf("verify: read target at byte 5: EOF; %w", imaging.ErrIncomplete), ExitWrite},
		{fmt.Errorf("profile x: %w v1.99.0", factory.ErrUnknownVersion), ExitUsage},
		{fmt.Errorf("profile x: %w", factory.ErrUnknownExtension), ExitUsage},
	} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.code)
		}
	}
}
