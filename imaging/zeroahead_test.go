package imaging

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingReader signals reached once n bytes have been read from r.
type countingReader struct {
	r       io.Reader
	read    atomic.Int64
	n       int64
	reached chan struct{}
	once    sync.Once
}

func (c *countingReader) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	if c.read.Add(int64(m)) >= c.n {
		c.once.Do(func() { close(c.reached) })
	}
	return m, err
}

// gatedFile holds its first write into the third chunk until gate closes.
type gatedFile struct {
	*os.File
	entered, gate chan struct{}
	once          sync.Once
}

func (g *gatedFile) WriteAt(p []byte, off int64) (int, error) {
	if off >= 2*chunkSize {
		g.once.Do(func() {
			close(g.entered)
			<-g.gate
		})
	}
	return g.File.WriteAt(p, off)
}

// While a card is busy writing data, the decoder goes on through the zero
// chunks after it (they hold no buffer of the pool): here 12 MiB of data,
// 40 MiB of zeros, 4 MiB of data; with the card's write of the last data
// chunk before the zeros held, the whole image is read before it is let
// go (with zero chunks in the pool's buffers it stopped at 16 MiB). The
// card is then the image byte for byte.
func TestZeroChunksRunAhead(t *testing.T) {
	const zeros = 10
	raw := make([]byte, (3+zeros+1)*chunkSize)
	r := rand.New(rand.NewPCG(5, 5))
	for _, part := range [][]byte{raw[:3*chunkSize], raw[(3+zeros)*chunkSize:]} {
		for i := range part {
			part[i] = byte(r.Uint32())
		}
	}
	src := &countingReader{r: bytes.NewReader(raw), n: int64(len(raw)), reached: make(chan struct{})}
	card := filepath.Join(t.TempDir(), "card.img")
	g := &gatedFile{entered: make(chan struct{}), gate: make(chan struct{})}
	done := make(chan []CardResult, 1)
	go func() {
		res, err := FlashAll(context.Background(), FlashOptions{
			Source: Source{Stream: src, StreamSize: int64(len(raw))}, Targets: []string{card}, Verify: true, ForceRaw: true,
			Open: func(path string, size int64) (Target, error) {
				f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
				g.File = f
				return g, err
			}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	timeout := time.After(30 * time.Second)
	select {
	case <-g.entered:
	case <-timeout:
		t.Fatal("the card's write never started")
	}
	select {
	case <-src.reached:
	case <-timeout:
		close(g.gate)
		t.Fatalf("with the card busy, the decoder stopped at %d of %d bytes: it waits for the card through zeros", src.read.Load(), len(raw))
	}
	close(g.gate)
	res := <-done
	if res == nil || res[0].Err != nil || !res[0].Verified {
		t.Fatalf("%+v", res)
	}
	if got, _ := os.ReadFile(card); !bytes.Equal(got, raw) {
		t.Fatal("the card is not the image")
	}
}
