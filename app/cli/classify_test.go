package cli

import (
	"context"
	"net"
	"net/http"
	"testing"

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
