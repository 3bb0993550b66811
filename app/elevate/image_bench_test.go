package elevate

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
)

// BenchmarkImageStream sends 256 MiB through an OS pipe, as from the
// parent to the child, and reads it as the pipeline does (4 MiB reads).
func BenchmarkImageStream(b *testing.B) {
	const n = 256 << 20
	src := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	buf := make([]byte, 4<<20)
	b.SetBytes(n)
	for b.Loop() {
		pr, pw, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		setPipeSize(pw)
		go func() {
			r := io.LimitReader(repeat{src}, n)
			if _, errs := SendImages(pw, []io.Reader{r}, []int64{n}); errs[0] != nil {
				b.Error(errs[0])
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		rc := ReceiveImages(ctx, pr, cancel, 1)[0]
		got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf)
		if err != nil || got != n {
			b.Fatal(got, err)
		}
		pw.Close()
		<-ctx.Done()
		pr.Close()
	}
}

type repeat struct{ b []byte }

func (r repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r.b)
	}
	return n, nil
}
