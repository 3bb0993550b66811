package node

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A node that takes the TCP connection and never answers the TLS
// handshake: the error says how long it was waited for ("within 0s" it
// said), and a timeout of unknown length never says 0s.
func TestProbeTimeoutSaysHowLong(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }() // silent until the test ends
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = Probe(ctx, l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "no answer from "+l.Addr().String()+" within 300ms") {
		t.Fatalf("err %v, want no answer within 300ms", err)
	}
	if s := (&NetworkError{Endpoint: "192.0.2.1:50000", Kind: NetTimeout}).Error(); strings.Contains(s, " 0s") || !strings.Contains(s, "no answer from 192.0.2.1:50000") {
		t.Fatalf("%q", s)
	}
}
