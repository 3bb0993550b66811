//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
	if err := imagetest.WriteRaw(bufio.NewWriterSize(f, 1<<20), size, 3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	head := make([]byte, 1<<20)
	if f, err := os.Open(img); err != nil {
		t.Fatal(err)
	} else {
		io.ReadFull(f, head)
		f.Close()
	}
	// A kill that lands after the last byte (the machine may be loaded)
	// proves nothing: then it is tried again.
	for attempt := range 3 {
		card := filepath.Join(dir, "card.img")
		os.Remove(card)
		cmd := exec.Command(os.Args[0], elevate.Args{Image: img, Device: card}.List()...)
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
		sc := bufio.NewScanner(stdout)
		killed := false
		for sc.Scan() {
			var ev struct {
				Event, Stage string
				Done, Total  int64
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "progress" && ev.Stage == "write" && ev.Done > 0 && ev.Done < ev.Total {
				cmd.Process.Kill() // SIGKILL: no deferred code, no cleanup
				killed = true
				break
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		stdin.Close()
		if !killed {
			t.Fatalf("attempt %d: no write progress before the child ended", attempt)
		}
		st, err := os.Stat(card)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() >= size {
			t.Logf("attempt %d: killed only after the last byte was written", attempt)
			continue
		}
		got := make([]byte, len(head))
		cf, err := os.Open(card)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(cf, got)
		cf.Close()
		if bytes.Equal(got, head) {
			t.Fatalf("killed after %d of %d bytes, the card holds the image's first MiB: it would boot half an image", st.Size(), size)
		}
		return
	}
	t.Skip("the write always finished before the kill")
}
