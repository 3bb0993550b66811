package imaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// followFor flashes a 1 MiB-or-less partial file as the elevated child
// does (Source.Growing, fed by feed) and returns its error, failing the
// test if it takes more than 2 s: the follower used to turn the file's
// EOF into (0, nil) and spin for ever, deaf to its context.
func followFor(t *testing.T, ctx context.Context, feed io.Reader) error {
	t.Helper()
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	dir := t.TempDir()
	partial := filepath.Join(dir, "img.partial")
	if err := os.WriteFile(partial, data, 0o600); err != nil {
		t.Fatal(err)
	}
	g := NewGrowing()
	go g.ReadFeed(feed)
	errc := make(chan error, 1)
	go func() {
		_, err := flashOne(ctx, FlashOptions{Source: Source{Path: partial, Growing: g}, Targets: []string{filepath.Join(dir, "card.img")}, Verify: true})
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("flashed from a file shorter than announced")
		}
		return err
	case <-time.After(2 * time.Second):
		t.Fatal("the follower is still reading after 2 s")
		return nil
	}
}

// A "done" for more bytes than the file holds is a short image, not a
// wait for bytes that will never come.
func TestFollowShortFileEnds(t *testing.T) {
	raw := skipRaw(t)
	size := len(zstdBytes(t, raw))
	err := followFor(t, context.Background(), strings.NewReader(fmt.Sprintf("size %d\ndone\n", size+1<<20)))
	if !errors.Is(err, errShortImage) {
		t.Fatalf("got %v, want a short image", err)
	}
}

// A feed that stalls (its writer alive, silent) still ends on the flash's
// cancel.
func TestFollowHonoursContext(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		fmt.Fprintf(pw, "size 100\n") // the head, then nothing
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	err := followFor(t, ctx, pr)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want cancelled", err)
	}
}
