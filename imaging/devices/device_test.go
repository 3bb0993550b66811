package devices

import (
	"errors"
	"os"
	"testing"
	"time"
)

// Close must not wait for a Write stuck in the kernel: the pipeline closes
// the target when the user cancels a flash onto a hung reader. A pipe nobody
// reads stands in for the stuck device.
func TestCloseDoesNotWaitForStuckWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dev := newDevice(w, &Disk{Path: "pipe"}, false, Options{SyncEvery: -1})
	writeErr := make(chan error, 1)
	go func() {
		_, err := dev.Write(make([]byte, 4<<20)) // far more than a pipe buffer
		writeErr <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		dev.mu.Lock()
		inflight := dev.inflight
		dev.mu.Unlock()
		if inflight > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("write never started")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let it block on the full pipe

	closed := make(chan error, 1)
	go func() { closed <- dev.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, errStuck) {
			t.Errorf("Close during a stuck write: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked behind a stuck write")
	}
	select {
	case err := <-writeErr:
		var ioe *IOError
		if !errors.As(err, &ioe) || ioe.Op != "write" {
			t.Errorf("stuck write returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("write did not return after Close")
	}
	if _, err := dev.Write([]byte("x")); err == nil {
		t.Error("write after Close succeeded")
	}
}
