package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// An image download whose server cannot be reached (e.g. --installer with
// the factory down) is a network failure (3), not an internal one (1).
func TestClassifyImageDownloadUnreachable(t *testing.T) {
	url := "http://" + testkit.ClosedAddr(t) + "/image/x/v1.14.5/metal-arm64.raw.xz" // connection refused
	c := &imaging.Cache{Dir: t.TempDir(), Retries: -1}
	_, err := c.Fetch(context.Background(), http.DefaultClient, url, "x/v1.14.5/metal-arm64.raw.xz", nil)
	if err == nil {
		t.Fatal("download from a closed port succeeded")
	}
	if code := exitCode(err); code != contract.ExitNetwork {
		t.Fatalf("exit code %d, want %d (%v)", code, contract.ExitNetwork, err)
	}
}

// A stalled image download (retries exhausted) is a network failure.
func TestClassifyStalledDownload(t *testing.T) {
	srv := factorytest.New(t)
	srv.AddImage("x", "v1.14.5", "metal-arm64.raw.xz", bytes.Repeat([]byte{1}, 64<<10))
	srv.Inject(factorytest.ImagePath("x", "v1.14.5", "metal-arm64.raw.xz"), factorytest.Fault{Kind: factorytest.FaultStall, After: 100})
	c := &imaging.Cache{Dir: t.TempDir(), Retries: -1, IdleTimeout: 200 * time.Millisecond}
	_, err := c.Fetch(context.Background(), srv.Client(), srv.ImageURL("x", "v1.14.5", "metal-arm64.raw.xz"), "x/v1.14.5/metal-arm64.raw.xz", nil)
	if code := exitCode(err); code != contract.ExitNetwork {
		t.Fatalf("stalled download %v: exit %d, want %d", err, code, contract.ExitNetwork)
	}
}

// Each input and storage failure maps to the documented exit code.
func TestClassifyInputsAndStorage(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("image x: %w: it is a bzip2 file", imaging.ErrUnsupportedImage), contract.ExitImage},
		{&imaging.CacheError{Path: "/ro/cache", Err: syscall.EROFS}, contract.ExitStorage},
		{fmt.Errorf("verify: read target at byte 5: EOF; %w", imaging.ErrIncomplete), contract.ExitWrite},
		{fmt.Errorf("profile x: %w v1.99.0", factory.ErrUnknownVersion), contract.ExitUsage},
		{fmt.Errorf("profile x: %w", factory.ErrUnknownExtension), contract.ExitUsage},
	} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.code)
		}
	}
}

// A first flash whose streamed download fails on every try leaves the card
// incomplete, but the failure is the network's: exit 3, not the card's 6.
// One cut that a retry repairs is no failure at all (exit 0).
func TestClassifyStreamedDownloadEveryTryFailed(t *testing.T) {
	fx := imagetest.New(t, 8<<20, 1, 1<<20)
	for _, always := range []bool{true, false} {
		srv := factorytest.New(t)
		srv.AddImage("x", "v1.14.5", "metal-arm64.raw.xz", fx.XZ)
		path := factorytest.ImagePath("x", "v1.14.5", "metal-arm64.raw.xz")
		f := factorytest.Fault{Kind: factorytest.FaultReset, After: int64(len(fx.XZ) / 2), Times: 1}
		if always {
			f.Times = 0
		}
		srv.Inject(path, f)
		c := &imaging.Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond}
		card := filepath.Join(t.TempDir(), "card.img")
		cards, err := imaging.FlashAll(context.Background(), imaging.FlashOptions{
			Source:  imaging.Source{URL: srv.ImageURL("x", "v1.14.5", "metal-arm64.raw.xz"), Key: "x/v1.14.5/metal-arm64.raw.xz", Cache: c, HTTPClient: srv.Client()},
			Targets: []string{card}, Verify: true})
		if err == nil {
			err = cards[0].Err
		}
		want := contract.ExitOK
		if always {
			want = contract.ExitNetwork
		}
		if code := exitCode(err); code != want {
			t.Fatalf("reset on every try=%v: exit %d, want %d (%v)", always, code, want, err)
		}
	}
}
