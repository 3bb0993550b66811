package elevate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// stream is what SendImages writes for one image, data (declared size
// size).
func stream(t *testing.T, data []byte, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	sent, errs := SendImages(&buf, []io.Reader{bytes.NewReader(data)}, []int64{size})
	if errs[0] != nil || !sent[0].Complete || sent[0].Bytes != int64(len(data)) {
		t.Fatalf("send: %+v %v", sent[0], errs[0])
	}
	if sum := sha256.Sum256(data); sent[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("sent sha256 %s", sent[0].SHA256)
	}
	if int64(buf.Len()) != StreamLength(int64(len(data))) {
		t.Fatalf("%d bytes on the wire, StreamLength says %d", buf.Len(), StreamLength(int64(len(data))))
	}
	return buf.Bytes()
}

// receiveOne reads a stream of one image from in to its end and says
// whether stdin's end cancelled the context.
func receiveOne(t *testing.T, in io.Reader) (data []byte, r *Received, err error, cancelled bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r = ReceiveImages(ctx, in, cancel, 1)[0]
	data, err = io.ReadAll(struct{ io.Reader }{r})
	select {
	case <-ctx.Done():
		cancelled = true
	case <-time.After(2 * time.Second):
	}
	return data, r, err, cancelled
}

// The image arrives whole, in frames that fill the pipeline's reads, with
// the sender's size and hash; stdin's EOF after it still cancels.
func TestImageStreamRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, FrameSize - 1, FrameSize, FrameSize + 1, 3*FrameSize + 12345} {
		data := randomBytes(n, uint64(n))
		for _, size := range []int64{int64(n), -1} {
			wire := stream(t, data, size)
			got, r, err, cancelled := receiveOne(t, bytes.NewReader(wire))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%d bytes (size %d): got %d, %v", n, size, len(got), err)
			}
			if s, err := r.Size(); s != size || err != nil {
				t.Fatalf("size %d %v, want %d", s, err, size)
			}
			if sum := sha256.Sum256(data); !bytes.Equal(r.SHA256(), sum[:]) {
				t.Fatalf("received sum %x", r.SHA256())
			}
			if !cancelled {
				t.Fatal("stdin's EOF after the image did not cancel")
			}
		}
	}
}

// A stream cut anywhere (the parent stopped sending, its image failed) is
// an error, never the image's end, and cancels the child.
func TestImageStreamCut(t *testing.T) {
	data := randomBytes(2*FrameSize+100, 7)
	wire := stream(t, data, int64(len(data)))
	hdr := headerLen(1)
	for _, at := range []int{0, 5, hdr, hdr + 2, hdr + recordLen + 1000, hdr + recordLen + FrameSize, len(wire) - recordLen - endLen, len(wire) - 10, len(wire) - 1} {
		_, _, err, cancelled := receiveOne(t, bytes.NewReader(wire[:at]))
		if err == nil || errors.Is(err, io.EOF) || !cancelled {
			t.Fatalf("cut at %d of %d: err %v, cancelled %v", at, len(wire), err, cancelled)
		}
	}
}

// What SendImages never writes is refused: another start, a frame too
// long, more than the announced size, an end that counts otherwise, a
// negative size.
func TestImageStreamMalformed(t *testing.T) {
	data := randomBytes(1000, 3)
	good := stream(t, data, 1000)
	sizeAt := len(streamMagic) + 4
	bad := map[string][]byte{}
	b := bytes.Clone(good)
	copy(b, "NOTIMAGE")
	bad["magic"] = b
	b = bytes.Clone(good[:headerLen(1)])
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, FrameSize+1)
	bad["long frame"] = append(b, make([]byte, FrameSize+1)...)
	b = bytes.Clone(good)
	binary.BigEndian.PutUint64(b[sizeAt:], 999)
	bad["more than announced"] = b
	b = bytes.Clone(good)
	binary.BigEndian.PutUint64(b[len(b)-8:], 1001)
	bad["count"] = b
	b = bytes.Clone(good)
	binary.BigEndian.PutUint64(b[sizeAt:], uint64(1<<63)) // negative
	bad["size"] = b
	for name, wire := range bad {
		_, _, err, _ := receiveOne(t, bytes.NewReader(wire))
		if !errors.Is(err, ErrImageStream) {
			t.Errorf("%s: %v, want ErrImageStream", name, err)
		}
	}
}

// The child's reads end with its context (SIGTERM) while stdin sends
// nothing, before and after the stream's start.
func TestImageStreamContextEndsReads(t *testing.T) {
	for _, head := range [][]byte{nil, stream(t, randomBytes(10, 1), 10)[:headerLen(1)]} {
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write(head)
		ctx, cancel := context.WithCancel(context.Background())
		r := ReceiveImages(ctx, pr, func() {}, 1)[0]
		done := make(chan error, 2)
		go func() {
			_, err := r.Size()
			if err == nil {
				_, err = r.Read(make([]byte, 10))
			}
			done <- err
		}()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("read after cancel: %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a read still waits 2 s after the cancel")
		}
	}
}

// The source's failure is its image's error, and the child is told
// (the image's failure record ends the stream); a child that stopped
// reading ends the sending without one, incomplete.
func TestSendImageErrors(t *testing.T) {
	boom := errors.New("xz: corrupt block")
	src := io.MultiReader(bytes.NewReader(randomBytes(FrameSize+5, 2)), iotest.ErrReader(boom))
	var wire bytes.Buffer
	sent, errs := SendImages(&wire, []io.Reader{src}, []int64{-1})
	if !errors.Is(errs[0], boom) || sent[0].Complete || sent[0].Bytes != FrameSize+5 {
		t.Fatalf("source failure: %+v %v", sent[0], errs[0])
	}
	got, _, err, cancelled := receiveOne(t, &wire)
	if !errors.Is(err, ErrImageFailed) || len(got) != FrameSize+5 || !cancelled {
		t.Fatalf("the child read %d bytes, %v (cancelled %v), want the image's failure", len(got), err, cancelled)
	}
	pr, pw := io.Pipe()
	pr.Close()
	sent, errs = SendImages(pw, []io.Reader{bytes.NewReader(randomBytes(10, 2))}, []int64{10})
	if errs[0] != nil || sent[0].Complete {
		t.Fatalf("reader gone: %+v %v", sent[0], errs[0])
	}
}

// A feed that fails stops the child (its stdin closes) and is the run's
// error; a feed still waiting when the child exits is told to stop, and
// the child's failure is the run's.
func TestRunFedFeed(t *testing.T) {
	boom := errors.New("download failed")
	start := time.Now()
	err := RunFed(context.Background(), sh(`cat >/dev/null; echo '{"event":"error","code":130,"message":"interrupted"}'; exit 130`), nil,
		func(_ context.Context, w io.Writer) error {
			_, _ = w.Write([]byte("part of it"))
			return boom
		})
	if !errors.Is(err, boom) || time.Since(start) > 5*time.Second {
		t.Fatalf("failed feed: %v", err)
	}
	stopped := make(chan struct{})
	err = RunFed(context.Background(), sh(`echo '{"event":"error","code":5,"message":"refused"}'; exit 5`), nil,
		func(ctx context.Context, w io.Writer) error {
			<-ctx.Done() // a source that waits (a stalled download) until told
			close(stopped)
			return ctx.Err()
		})
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != 5 {
		t.Fatalf("child exited first: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("RunFed returned before its feed")
	}
}

// A real child process reads the stream from its stdin: the bytes, in
// order, through a pipe (the stand-in reads exactly StreamLength).
func TestImageStreamThroughAProcess(t *testing.T) {
	data := randomBytes(2*FrameSize+77, 9)
	var out strings.Builder
	cmd := exec.Command("sh", "-c", "head -c "+strconv.FormatInt(StreamLength(int64(len(data))), 10)+" | sha256sum")
	cmd.Stdout = &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sent, serrs := SendImages(stdin, []io.Reader{bytes.NewReader(data)}, []int64{int64(len(data))})
	stdin.Close()
	if err := cmd.Wait(); err != nil || serrs[0] != nil || !sent[0].Complete {
		t.Fatalf("%v %v %+v", err, serrs[0], sent[0])
	}
	wire := sha256.Sum256(stream(t, data, int64(len(data))))
	if got := strings.Fields(out.String())[0]; got != hex.EncodeToString(wire[:]) {
		t.Fatalf("the process read %s", got)
	}
}
