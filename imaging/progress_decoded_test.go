package imaging

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// A gzip image does not say its decoded size up front: the write reports
// count compressed bytes (Compressed) and carry the decoded bytes written
// (Decoded), which the front ends show; the last report counts the
// decoded image.
func TestProgressCarriesDecodedBytesWhenCountingCompressed(t *testing.T) {
	raw, err := imagetest.Raw(24<<20, 3) // more than the pipeline reads ahead
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.NoCompression) // read as it is written
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	src := writeTemp(t, "image.raw.gz", gz.Bytes())
	dst := filepath.Join(t.TempDir(), "card.img")
	var log progressLog
	_, err = flashOne(context.Background(), FlashOptions{
		Source: Source{Path: src}, Targets: []string{dst}, Progress: log.fn,
		Open: func(p string, _ int64) (Target, error) {
			f, err := os.Create(p)
			return &fileTarget{f: f, delay: 150 * time.Millisecond}, err // several throttled reports
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	log.mu.Lock()
	for _, p := range log.reps {
		if p.Stage != StageWrite || !p.Compressed || p.Done == 0 {
			continue
		}
		if p.Decoded <= 0 || p.Decoded > int64(len(raw)) || p.Total != int64(gz.Len()) {
			t.Errorf("compressed write report %+v: want the decoded bytes written", p)
		}
		seen = true
	}
	log.mu.Unlock()
	if !seen {
		t.Fatal("no compressed write report in between")
	}
	if p, _ := log.last(StageWrite); p.Compressed || p.Done != int64(len(raw)) || p.Decoded != 0 {
		t.Errorf("last write report %+v, want the decoded size", p)
	}
}
