package node

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
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
	// The wait said is what was left of the deadline when the probe began
	// (300ms, or 290ms on a machine busy for 5 ms before it: CI-like load
	// made a fixed "300ms" flaky): at most the deadline, never 0.
	m := regexp.MustCompile(`^no answer from ` + regexp.QuoteMeta(l.Addr().String()) + ` within (\d+)ms \(`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("err %v, want no answer within about 300ms", err)
	}
	if ms, _ := strconv.Atoi(m[1]); ms <= 0 || ms > 300 || ms%10 != 0 {
		t.Fatalf("err %v: the wait said is not the deadline's, rounded to 10ms", err)
	}
	if s := (&NetworkError{Endpoint: "192.0.2.1:50000", Kind: NetTimeout}).Error(); strings.Contains(s, " 0s") || !strings.Contains(s, "no answer from 192.0.2.1:50000") {
		t.Fatalf("%q", s)
	}
}
