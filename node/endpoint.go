package node

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Endpoint is a node's Talos API address, parsed once (ParseEndpoint) and
// carried typed: an IP address or a host name, and a port.
type Endpoint struct {
	Host string // an IP address's canonical text, or a host name as typed (no trailing dot)
	Port int
}

// EndpointAt is the endpoint of an address (an inventory node's) at port
// (0: DefaultPort).
func EndpointAt(a netip.Addr, port int) Endpoint {
	if port == 0 {
		port = DefaultPort
	}
	return Endpoint{Host: a.Unmap().String(), Port: port}
}

// String is host:port ([v6]:port), the form every call of this package takes.
func (e Endpoint) String() string {
	if e.Host == "" {
		return ""
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}

// Addr is the endpoint's IP address; invalid when it is a host name.
func (e Endpoint) Addr() netip.Addr {
	a, err := netip.ParseAddr(e.Host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// IsZero: no endpoint.
func (e Endpoint) IsZero() bool { return e.Host == "" }

// ErrNotAddress: what was typed is neither an IP address nor a host name
// (a usage error: nothing was looked up or dialled).
var ErrNotAddress = errors.New("not an IP address or host name")

// ParseEndpoint reads "host" or "host:port" (IPv6 as [::1]:port or bare),
// defaulting the port to DefaultPort. The host must be an IP address or a
// syntactically valid host name, decided here before any lookup: a typo in
// an address ("127.0.3.3l", "127.0.3.310") would otherwise go to the
// system's DNS resolver as a name. User info ("user:password@") is
// refused, and error messages never repeat it.
func ParseEndpoint(ep string) (Endpoint, error) {
	ep = strings.TrimSpace(ep)
	ep = strings.TrimPrefix(ep, "https://")
	if ep == "" {
		return Endpoint{}, errors.New("node address is empty")
	}
	bad := func(err error) error {
		return fmt.Errorf("node address %q: %w", displayEndpoint(ep), err)
	}
	if strings.Contains(ep, "@") {
		return Endpoint{}, bad(errors.New("user info (user:password@) is not part of a node address"))
	}
	host, port := ep, DefaultPort
	if h, p, err := net.SplitHostPort(ep); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return Endpoint{}, bad(errors.New("the port must be a number from 1 to 65535"))
		}
		host, port = h, n
	} else if strings.Count(ep, ":") == 1 {
		return Endpoint{}, bad(fmt.Errorf("%w: want host or host:port", ErrNotAddress))
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return Endpoint{Host: a.Unmap().String(), Port: port}, nil
	}
	if why := hostNameSyntax(host); why != "" {
		return Endpoint{}, bad(fmt.Errorf("%w (%s)", ErrNotAddress, why))
	}
	return Endpoint{Host: strings.TrimSuffix(host, "."), Port: port}, nil
}

// hostNameSyntax says why s is no host name ("" when it is one): labels
// of letters, digits and hyphens (RFC 1123 2.1), 1-63 bytes each, 253 in
// all; digits and dots alone are an IPv4 address or nothing; the last
// label of a dotted name begins with a letter, as every top-level domain
// does (RFC 1034 3.5's preferred syntax; RFC 3696 2: never all-numeric),
// and a dotted quad whose last part is mistyped is no name either, so a
// mistyped address ("127.0.3.3l", "192.168.1.x1") is not taken for a
// name (a name such as 10.0.0.1.nip.io still is).
func hostNameSyntax(s string) string {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return "a host name has 1 to 253 characters"
	}
	if strings.Trim(s, "0123456789.") == "" {
		return "digits and dots that are not an IPv4 address"
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		switch {
		case l == "" || len(l) > 63:
			return "each part between dots has 1 to 63 characters"
		case l[0] == '-' || l[len(l)-1] == '-':
			return "a part may not begin or end with a hyphen"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "a host name has only letters, digits, hyphens and dots"
			}
		}
	}
	if l := strings.ToLower(s); len(labels) == 1 && len(l) > 2 && strings.HasPrefix(l, "0x") && strings.Trim(l[2:], "0123456789abcdef") == "" {
		// inet_aton's hex form of an IPv4 address: glibc's resolver reads
		// it as one, Go's asks the DNS server for it as a name.
		return "a hexadecimal number (0x...) is an IPv4 address in disguise: give it dotted (127.0.0.1)"
	}
	if len(labels) == 4 && allDigits(labels[0]) && allDigits(labels[1]) && allDigits(labels[2]) {
		return "the shape of an IPv4 address with a mistyped last part"
	}
	if last := labels[len(labels)-1]; len(labels) > 1 && !(last[0] >= 'a' && last[0] <= 'z' || last[0] >= 'A' && last[0] <= 'Z') {
		return "the last part of a dotted name begins with a letter: a mistyped IP address?"
	}
	return ""
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
