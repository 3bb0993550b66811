package node

import (
	"errors"
	"testing"
)

// An IPv4 address in inet_aton's hex form ("0x7f000001") is a valid
// one-label host name by syntax, so it went to the resolver: glibc reads
// it as an address, Go's own resolver asks the DNS server for it. Refused
// before any lookup, as the other mistyped addresses are; names that only
// begin with 0x and a hex digit stay names.
func TestParseEndpointRefusesHexAddress(t *testing.T) {
	for _, s := range []string{"0x7f000001", "0X7F000001:50000", "0x7f000001."} {
		if e, err := ParseEndpoint(s); !errors.Is(err, ErrNotAddress) {
			t.Errorf("%q: %v, %v; want ErrNotAddress", s, e, err)
		}
	}
	for _, s := range []string{"0xcafe-node", "0xdead.example.com", "cp-1"} {
		if _, err := ParseEndpoint(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}
