//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// A card whose write is killed (kill -9 of a real `talosflash --flash`
// process, here the elevated child that writes cards) never boots half an
// image: the first MiB, with the partition table, is written last, so a
// card cut off before the end does not hold the image's first MiB.
func TestKilledFlashLeavesNoPartitionTable(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 1 GiB image")
	}
	dir := t.TempDir()
	const size = 1 << 30
	img := filepath.Join(dir, "big.raw")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := imagetest.WriteRaw(bw, size, 3); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	// Data between the tables (no zero chunk the card could already hold),
	// so the write takes its time.
	r := rand.New(rand.NewPCG(3, 3))
	buf := make([]byte, 1<<20)
	for off := int64(1 << 20); off < size-(1<<20); off += int64(len(buf)) {
		for i := 0; i+8 <= len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	head, tail := make([]byte, 1<<20), make([]byte, 512)
	readAt := func(path string, b []byte, off int64) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.ReadAt(b, off) // short (a card not written that far) leaves zeros
	}
	readAt(img, head, 0)
	readAt(img, tail, size-512)
	// The process is stopped (SIGSTOP) as soon as it reports writing, the
	// card looked at, then killed (SIGKILL: no deferred code, no cleanup).
	// Only a card whose last sector (the backup GPT header) is not the
	// image's yet was cut off mid-write; one that already holds it may
	// have finished (the machine may be loaded): then it is tried again.
	for attempt := range 3 {
		card := filepath.Join(dir, "card.img")
		os.Remove(card)
		cmd := exec.Command(os.Args[0], elevate.Args{Devices: []string{card}}.List()...)
		cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
		stdin, err := cmd.StdinPipe() // open: closing it would cancel the child
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { // the image, on its stdin (open after it: closing it would cancel)
			f, err := os.Open(img)
			if err != nil {
				return
			}
			defer f.Close()
			elevate.SendImages(stdin, []io.Reader{bufio.NewReaderSize(f, 1<<20)}, []int64{size})
		}()
		sc := bufio.NewScanner(stdout)
		stopped := false
		for sc.Scan() {
			var ev struct {
				Event, Stage string
				Done, Total  int64
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "progress" && ev.Stage == "write" && ev.Done > 0 && ev.Done < ev.Total {
				cmd.Process.Signal(syscall.SIGSTOP)
				stopped = true
				break
			}
		}
		gotHead, gotTail := make([]byte, len(head)), make([]byte, len(tail))
		if stopped {
			readAt(card, gotTail, size-512)
			readAt(card, gotHead, 0)
		}
		cmd.Process.Kill()
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		stdin.Close()
		if !stopped {
			t.Fatalf("attempt %d: no write progress before the child ended", attempt)
		}
		if bytes.Equal(gotTail, tail) {
			t.Logf("attempt %d: stopped only after the last sector was written (%s)", attempt, sc.Text())
			continue
		}
		readAt(card, gotHead, 0) // after the kill: nothing more comes
		if bytes.Equal(gotHead, head) {
			t.Fatal("killed mid-write, the card holds the image's first MiB: it would boot half an image")
		}
		return
	}
	t.Skip("the write always finished before the kill")
}
