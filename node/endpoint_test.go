package node

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	good := map[string]string{
		"127.0.0.1":            "127.0.0.1:50000",
		"127.0.0.1:50001":      "127.0.0.1:50001",
		" 127.0.0.1 ":          "127.0.0.1:50000",
		"::1":                  "[::1]:50000",
		"[::1]:50001":          "[::1]:50001",
		"::ffff:127.0.0.2":     "127.0.0.2:50000", // v4-mapped: one node, one form
		"cp-1":                 "cp-1:50000",
		"cp-1.home.arpa":       "cp-1.home.arpa:50000",
		"cp-1.home.arpa.":      "cp-1.home.arpa:50000",
		"123.example.com:5":    "123.example.com:5",
		"node.xn--p1ai":        "node.xn--p1ai:50000",
		"10.0.0.1.nip.io":      "10.0.0.1.nip.io:50000",
		"https://10.0.0.1":     "10.0.0.1:50000",
		"talos-7xk-2qa:50000":  "talos-7xk-2qa:50000",
		"a-b.c-d.example.test": "a-b.c-d.example.test:50000",
	}
	for in, want := range good {
		e, err := ParseEndpoint(in)
		if err != nil || e.String() != want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", in, e.String(), err, want)
		}
		if n, err := NormalizeEndpoint(in); err != nil || n != want {
			t.Errorf("NormalizeEndpoint(%q) = %q, %v; want %q", in, n, err, want)
		}
	}
	// Typos of addresses and bad names: refused before any lookup, as
	// ErrNotAddress (a usage error).
	for _, in := range []string{"127.0.3.3l", "127.0.3.310", "127.0.0.1.", "10.0.0", "12345", "1.2.3.4.5",
		"192.168.1.x1", "a..b", "-cp", "cp-", "cp_1", "cp 1", "host:", "é.example", "10.0.0.1:abc:1"} {
		_, err := ParseEndpoint(in)
		if err == nil {
			t.Errorf("ParseEndpoint(%q): accepted", in)
			continue
		}
		if in != "host:" && in != "10.0.0.1:abc:1" && !errors.Is(err, ErrNotAddress) {
			t.Errorf("ParseEndpoint(%q) = %v: not ErrNotAddress", in, err)
		}
	}
	for _, in := range []string{"1.2.3.4:0", "1.2.3.4:65536", "user:pw@1.2.3.4", ""} {
		if _, err := ParseEndpoint(in); err == nil {
			t.Errorf("ParseEndpoint(%q): accepted", in)
		}
	}
	if e := EndpointAt(netip.MustParseAddr("::ffff:10.0.0.2"), 0); e.String() != "10.0.0.2:50000" || e.Addr() != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("EndpointAt = %v", e)
	}
	if e, _ := ParseEndpoint("cp-1"); e.Addr().IsValid() {
		t.Errorf("a host name has no Addr: %v", e.Addr())
	}
}
