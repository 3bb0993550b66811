package elevate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/iotest"
)

// Several images on one stdin: each reader gets its own image whole, with
// its size and hash, while the others are read at their own pace; one
// image that fails in the sender fails only its reader; a reader that is
// gone (Close) does not hold the others up.
func TestImagesStreamRoundTrip(t *testing.T) {
	datas := [][]byte{randomBytes(3*FrameSize+5, 1), randomBytes(FrameSize/2, 2), randomBytes(2*FrameSize, 3), randomBytes(4*FrameSize, 4)}
	failAt := errors.New("download cut")
	readers := []io.Reader{
		bytes.NewReader(datas[0]),
		bytes.NewReader(datas[1]),
		io.MultiReader(bytes.NewReader(datas[2][:FrameSize+7]), iotest.ErrReader(failAt)),
		bytes.NewReader(datas[3]),
	}
	sizes := []int64{int64(len(datas[0])), -1, int64(len(datas[2])), int64(len(datas[3]))}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs := ReceiveImages(ctx, pr, cancel, len(datas))
	rs[3].Close() // its cards are gone: the rest of it is dropped

	var (
		sent []Sent
		errs []error
	)
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		sent, errs = SendImages(pw, readers, sizes)
	}()
	got := make([][]byte, 3)
	gotErr := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { got[i], gotErr[i] = io.ReadAll(struct{ io.Reader }{rs[i]}) })
	}
	wg.Wait()
	<-sendDone
	for _, i := range []int{0, 1} {
		if gotErr[i] != nil || !bytes.Equal(got[i], datas[i]) {
			t.Fatalf("image %d: %d bytes, %v", i, len(got[i]), gotErr[i])
		}
		if s, _ := rs[i].Size(); s != sizes[i] {
			t.Fatalf("image %d: size %d", i, s)
		}
		if sum := sha256.Sum256(datas[i]); !bytes.Equal(rs[i].SHA256(), sum[:]) || !sent[i].Complete || errs[i] != nil {
			t.Fatalf("image %d: sum %x, sent %+v %v", i, rs[i].SHA256(), sent[i], errs[i])
		}
	}
	if !errors.Is(gotErr[2], ErrImageFailed) || !errors.Is(errs[2], failAt) || sent[2].Complete {
		t.Fatalf("failed image: read %v, sent %+v %v", gotErr[2], sent[2], errs[2])
	}
	if !sent[3].Complete || errs[3] != nil {
		t.Fatalf("the dropped image was not sent whole: %+v %v", sent[3], errs[3])
	}
	select {
	case <-ctx.Done():
		t.Fatal("cancelled while stdin is open")
	default:
	}
	pw.Close() // the parent's stdin closes: the child is cancelled
	<-ctx.Done()
}

// What SendImages never writes is refused: another count than the child
// was told, a record for an image that does not exist or has ended, an
// end that counts otherwise; a stream cut before every image ended is an
// error for those not ended.
func TestImagesStreamRefused(t *testing.T) {
	var whole bytes.Buffer
	SendImages(&whole, []io.Reader{bytes.NewReader([]byte("ab")), bytes.NewReader([]byte("c"))}, []int64{2, 1})
	wire := whole.Bytes()
	rec := func(i, n uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, i), n)
	}
	hdr := wire[:len(streamsMagic)+4+16]
	for name, c := range map[string]struct {
		wire []byte
		n    int
	}{
		"three told":    {wire, 3},
		"single stream": {stream(t, []byte("ab"), 2), 2},
		"unknown image": {append(bytes.Clone(hdr), rec(5, 1)...), 2},
		"ended image":   {append(append(bytes.Clone(hdr), rec(1, frameFailed)...), rec(1, 1)...), 2},
		"wrong count":   {append(append(append(bytes.Clone(hdr), rec(0, 1)...), 'a'), append(rec(0, 0), make([]byte, sha256.Size+8)...)...), 2},
		"cut":           {wire[:len(wire)-3], 2},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		rs := ReceiveImages(ctx, bytes.NewReader(c.wire), cancel, c.n)
		failed := false
		for _, r := range rs {
			if _, err := io.ReadAll(struct{ io.Reader }{r}); err != nil {
				failed = true
			}
		}
		if !failed {
			t.Errorf("%s: accepted", name)
		}
		cancel()
	}
	// The stream as sent reads back.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs := ReceiveImages(ctx, bytes.NewReader(wire), cancel, 2)
	a, errA := io.ReadAll(struct{ io.Reader }{rs[0]})
	b, errB := io.ReadAll(struct{ io.Reader }{rs[1]})
	if string(a) != "ab" || string(b) != "c" || errA != nil || errB != nil {
		t.Fatalf("%q %v, %q %v", a, errA, b, errB)
	}
}
