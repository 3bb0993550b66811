package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/talosflash/talosflash/node/internal/talos114"
)

// Node is a Talos node found on the network.
type Node struct {
	Addr        string     // host:port
	IP          netip.Addr // host part of Addr
	Maintenance bool       // waiting for a machine config (apply with Apply)
	Configured  bool       // already configured: needs talosconfig (mTLS), not talosflash
	Stage       string     // machine stage as the node reports it ("maintenance", "booting", ...)
	// Hostname and Domainname are the node's HostnameStatus: Talos splits
	// an FQDN at its first dot (worker-1.lan: worker-1 and lan).
	Hostname     string
	Domainname   string `json:",omitempty"`
	MAC          string // first physical link's hardware address
	TalosVersion string // "" when unknown or not a version (see InvalidVersion)
	// InvalidVersion is what the node reported as its version when that
	// does not look like one, escaped and bounded (for display only).
	InvalidVersion  string `json:",omitempty"`
	Arch            string // from MachineService.Version (Talos >= 1.13 answers it in maintenance mode)
	CertFingerprint string // TLS certificate SPKI fingerprint (pin it with ApplyOptions.CertFingerprints)
	// Booted is what the node's image contains (schematic, overlay,
	// extensions); nil when the node exposes no extension statuses.
	Booted *Booted `json:",omitempty"`
	// Factory is which Image Factory built the booted image, as a Talos >=
	// 1.14 node reports it (ImageFactorySchematics); nil when not reported.
	Factory *Factory `json:",omitempty"`
	Note    string   // what could not be read, or why it counts as Talos
}

// Factory is a Talos 1.14 node's ImageFactorySchematics resource
// (ID image-factory-schematic): the schematic of the booted image and the
// factory that built it.
type Factory struct {
	SchematicID string `json:",omitempty"`
	Flavor      string `json:",omitempty"` // e.g. "Image Factory"
	APIURL      string `json:",omitempty"` // e.g. "https://factory.talos.dev"
}

// String is "https://factory.talos.dev (Image Factory)" or what is known of it.
func (f *Factory) String() string {
	if f == nil {
		return ""
	}
	switch {
	case f.APIURL != "" && f.Flavor != "":
		return f.APIURL + " (" + f.Flavor + ")"
	case f.APIURL != "":
		return f.APIURL
	}
	return f.Flavor
}

// readFactory reads ImageFactorySchematics (Talos >= 1.14; not sensitive).
// Older nodes do not have the type: nil, no error.
func readFactory(ctx context.Context, c *client.Client) *Factory {
	r, err := safe.StateGetByID[*talos114.ImageFactorySchematic](ctx, c.COSI, talos114.ImageFactorySchematicID)
	if err != nil {
		return nil
	}
	spec := r.TypedSpec()
	f := &Factory{SchematicID: spec.SchematicID, Flavor: printable(spec.Flavor, maxName), APIURL: printable(spec.APIURL, maxName)}
	if f.SchematicID != "" && !hexID.MatchString(f.SchematicID) {
		f.SchematicID = ""
	}
	if *f == (Factory{}) {
		return nil
	}
	return f
}

// FQDN is Hostname.Domainname, or Hostname without a domain.
func (n *Node) FQDN() string {
	if n.Domainname == "" {
		return n.Hostname
	}
	return n.Hostname + "." + n.Domainname
}

// IsHost reports whether the node's reported name is want, compared as
// Talos splits it (case-insensitive): an FQDN (worker-1.lan) needs both
// the short name and the domain, a short name (worker-1) only the short
// name, whatever the node's domain.
func (n *Node) IsHost(want string) bool {
	host, domain, fqdn := strings.Cut(want, ".")
	if !strings.EqualFold(host, n.Hostname) {
		return false
	}
	return !fqdn || strings.EqualFold(domain, n.Domainname)
}

// Unified reports whether the node runs Talos >= 1.13, whose maintenance
// mode is the regular API (all apply modes, Version, dry-run diff).
func (n *Node) Unified() bool { return UnifiedMaintenance(n.TalosVersion) }

// UnifiedMaintenance reports whether Talos version v (e.g. "v1.14.5") has
// the maintenance mode of 1.13 and later. Unknown versions count as older:
// Talos <= 1.12 does not reveal its version to an insecure client.
func UnifiedMaintenance(v string) bool {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 1 || major == 1 && minor >= 13
}

// DiscoverOptions configures Discover. Only the given prefixes are scanned.
type DiscoverOptions struct {
	Prefixes     []netip.Prefix
	Port         int           // default 50000
	DialTimeout  time.Duration // TCP connect per host; default 500ms
	ProbeTimeout time.Duration // TLS + API probe per open port; default 3s
	Concurrency  int           // default 64
	MaxHosts     int           // refuse to scan more; default 1024
	Progress     func(done, total int)
}

// Discovery limits.
const (
	DefaultMaxHosts    = 1024
	DefaultConcurrency = 64
	// DefaultProbeTimeout bounds one Probe (also a direct call whose
	// context has no deadline: a port that accepts and stays silent).
	DefaultProbeTimeout = 3 * time.Second
)

// ErrTooManyHosts is returned when the prefixes hold more hosts than MaxHosts.
var ErrTooManyHosts = errors.New("too many hosts to scan")

// CheckScan says whether Discover would refuse opts (port out of range,
// more hosts than MaxHosts) without sending anything: front ends check
// before they announce a scan.
func CheckScan(opts DiscoverOptions) error {
	if opts.Port < 0 || opts.Port > 65535 {
		return fmt.Errorf("port %d is out of range", opts.Port)
	}
	if opts.MaxHosts <= 0 {
		opts.MaxHosts = DefaultMaxHosts
	}
	_, err := expandPrefixes(opts.Prefixes, opts.MaxHosts)
	return err
}

// Discover finds Talos API endpoints in the given prefixes: TCP connect with
// a short timeout and bounded concurrency, then Probe on every open port.
// Hosts that answer but are not Talos are left out. Results are sorted by IP.
func Discover(ctx context.Context, opts DiscoverOptions) ([]Node, error) {
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.Port < 1 || opts.Port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", opts.Port)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 500 * time.Millisecond
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MaxHosts <= 0 {
		opts.MaxHosts = DefaultMaxHosts
	}

	hosts, err := expandPrefixes(opts.Prefixes, opts.MaxHosts)
	if err != nil {
		return nil, err
	}

	var (
		mu    sync.Mutex
		found []Node
		done  int
	)
	jobs := make(chan netip.Addr)
	var wg sync.WaitGroup
	workers := min(opts.Concurrency, len(hosts))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ip := range jobs {
				n := scanHost(ctx, ip, opts)
				mu.Lock()
				if n != nil {
					found = append(found, *n)
				}
				done++
				if opts.Progress != nil {
					opts.Progress(done, len(hosts)) // under mu: callers need no locking
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, ip := range hosts {
		select {
		case jobs <- ip:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()

	sort.Slice(found, func(i, j int) bool { return found[i].IP.Less(found[j].IP) })
	if err := ctx.Err(); err != nil {
		return found, err
	}
	return found, nil
}

func scanHost(ctx context.Context, ip netip.Addr, opts DiscoverOptions) *Node {
	addr := netip.AddrPortFrom(ip, uint16(opts.Port)).String()
	d := net.Dialer{Timeout: opts.DialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	c.Close()

	pctx, cancel := context.WithTimeout(ctx, opts.ProbeTimeout)
	defer cancel()
	n, err := Probe(pctx, addr)
	if err != nil {
		return nil
	}
	return n
}

// expandPrefixes lists the host addresses of the prefixes (network and
// broadcast addresses of IPv4 prefixes up to /30 excluded), deduplicated.
func expandPrefixes(prefixes []netip.Prefix, maxHosts int) ([]netip.Addr, error) {
	if len(prefixes) == 0 {
		return nil, errors.New("no address ranges to scan")
	}
	for _, p := range prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("invalid prefix %v", p)
		}
		// Refuse before expanding: a /8 must not allocate 16M addresses.
		hostBits := p.Addr().BitLen() - p.Bits()
		if hostBits > 30 || (1<<hostBits) > maxHosts+2 {
			return nil, fmt.Errorf("%w: %v has more than %d addresses; pass a smaller range (e.g. a /24)", ErrTooManyHosts, p, maxHosts)
		}
	}

	seen := map[netip.Addr]bool{}
	var hosts []netip.Addr
	for _, p := range prefixes {
		p = p.Masked()
		hostBits := p.Addr().BitLen() - p.Bits()
		first, last := p.Addr(), lastAddr(p)
		for a := first; p.Contains(a); a = a.Next() {
			if p.Addr().Is4() && hostBits >= 2 && (a == first || a == last) {
				continue
			}
			if !seen[a] {
				seen[a] = true
				hosts = append(hosts, a)
			}
			if a == last {
				break
			}
		}
	}
	if len(hosts) > maxHosts {
		return nil, fmt.Errorf("%w: %d addresses, the limit is %d", ErrTooManyHosts, len(hosts), maxHosts)
	}
	return hosts, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	hostBits := len(b)*8 - p.Bits()
	for i := len(b) - 1; i >= 0 && hostBits > 0; i-- {
		n := min(hostBits, 8)
		b[i] |= byte(1<<n - 1)
		hostBits -= n
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Probe checks whether addr (host or host:port) is a Talos API and reads what
// a node without config reveals. It relies only on calls maintenance mode
// allows: the TLS handshake (a configured node asks for a client
// certificate), COSI reads of non-sensitive resources (machine status,
// version, hostname, links), and MachineService.Version, which maintenance
// mode answers with Unimplemented unless the caller is os:admin.
func Probe(ctx context.Context, addr string) (*Node, error) {
	endpoint, err := NormalizeEndpoint(addr)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultProbeTimeout)
		defer cancel()
	}
	n := &Node{Addr: endpoint}
	if host, _, err := net.SplitHostPort(endpoint); err == nil {
		n.IP, _ = netip.ParseAddr(host)
	}

	// 1. TLS handshake on a raw connection: is it TLS, does it want mTLS?
	trace := &connTrace{}
	if err := tlsProbe(ctx, endpoint, trace); err != nil {
		return nil, err
	}
	tr := trace.snapshot()
	n.CertFingerprint = CertFingerprint(tr.serverCert)
	if tr.certReq {
		// apid of a configured node requires a client certificate; without
		// talosconfig nothing more can be read. Its certificate and the CA
		// it asks for are the cluster's OS CA, which Talos makes with
		// Organization "talos" (machinery's secrets.NewTalosCA): any other
		// mTLS service is not taken for a node.
		if !talosIssued(tr.serverCert, tr.clientCAs) {
			return nil, fmt.Errorf("%s asks for a client certificate but is not a Talos node (neither its certificate nor the CA it asks for is a Talos CA, Organization \"talos\")", endpoint)
		}
		n.Configured = true
		n.Note = "asks for a client certificate from a Talos CA: a configured Talos node (use talosctl with its talosconfig)"
		return n, nil
	}

	// 2. API probes over the real machinery client.
	c, err := newInsecureClient(ctx, endpoint, &connTrace{}, nil)
	if err != nil {
		return nil, &NetworkError{Endpoint: endpoint, Kind: NetUnreachable, Detail: sanitize(err.Error())}
	}
	defer c.Close() //nolint:errcheck

	var evidence []string
	var notes []string

	if ms, err := safe.StateGet[*runtime.MachineStatus](ctx, c.COSI, resource.NewMetadata(runtime.NamespaceName, runtime.MachineStatusType, runtime.MachineStatusID, resource.VersionUndefined)); err == nil {
		n.Stage = ms.TypedSpec().Stage.String()
		n.Maintenance = ms.TypedSpec().Stage == runtime.MachineStageMaintenance
		evidence = append(evidence, "machine status")
	} else {
		notes = append(notes, "machine status unreadable")
	}

	vresp, verr := c.MachineClient.Version(ctx, &emptypb.Empty{})
	vst, _ := status.FromError(verr)
	switch {
	case verr == nil:
		evidence = append(evidence, "version API")
		if msgs := vresp.GetMessages(); len(msgs) > 0 {
			n.TalosVersion = msgs[0].GetVersion().GetTag()
			n.Arch = msgs[0].GetVersion().GetArch()
		}
	case vst.Code() == codes.Unimplemented && strings.Contains(vst.Message(), "maintenance"):
		// Talos' maintenance service refuses Version to non-admins with exactly this.
		n.Maintenance = n.Maintenance || n.Stage == ""
		evidence = append(evidence, "maintenance API")
	case vst.Code() == codes.PermissionDenied:
		evidence = append(evidence, "version API (permission denied)")
	}

	if len(evidence) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, &NetworkError{Endpoint: endpoint, Kind: NetTimeout, Detail: "probe timed out"}
		}
		return nil, fmt.Errorf("%s speaks TLS but is not a Talos API (%s)", endpoint, sanitize(vst.Message()))
	}

	if n.TalosVersion == "" { // not from the Version API: the COSI Version resource
		if v, err := safe.StateGet[*runtime.Version](ctx, c.COSI, resource.NewMetadata(runtime.NamespaceName, runtime.VersionType, "version", resource.VersionUndefined)); err == nil {
			n.TalosVersion = v.TypedSpec().Version
		} else {
			notes = append(notes, "version unreadable")
		}
	}
	if b, err := readBooted(ctx, c); err != nil || b == nil {
		notes = append(notes, "no extension statuses (what it booted is unknown)")
	} else {
		n.Booted = b
	}
	if atLeast114(n.TalosVersion) {
		n.Factory = readFactory(ctx, c)
	}
	if h, err := safe.StateGet[*network.HostnameStatus](ctx, c.COSI, resource.NewMetadata(network.NamespaceName, network.HostnameStatusType, network.HostnameID, resource.VersionUndefined)); err == nil {
		n.Hostname, n.Domainname = h.TypedSpec().Hostname, h.TypedSpec().Domainname
	} else {
		notes = append(notes, "hostname unreadable")
	}
	if links, err := safe.StateListAll[*network.LinkStatus](ctx, c.COSI); err == nil {
		for l := range links.All() {
			if l.TypedSpec().Physical() && len(l.TypedSpec().HardwareAddr) > 0 {
				n.MAC = net.HardwareAddr(l.TypedSpec().HardwareAddr).String()
				break
			}
		}
	} else {
		notes = append(notes, "links unreadable")
	}

	notes = append(notes, n.clean()...)
	n.Note = "Talos (" + strings.Join(evidence, ", ") + ")"
	if len(notes) > 0 {
		n.Note += "; " + strings.Join(notes, ", ")
	}
	return n, nil
}

// talosOrg is the Organization of every Talos OS CA (secrets.NewTalosCA).
const talosOrg = "talos"

// talosIssued reports whether the server's certificate was issued by a
// Talos CA or the CAs it accepts client certificates from include one.
func talosIssued(serverCert []byte, clientCAs [][]byte) bool {
	if leaf, err := x509.ParseCertificate(serverCert); err == nil && slices.Contains(leaf.Issuer.Organization, talosOrg) {
		return true
	}
	for _, der := range clientCAs {
		var rdn pkix.RDNSequence
		if rest, err := asn1.Unmarshal(der, &rdn); err != nil || len(rest) > 0 {
			continue
		}
		var name pkix.Name
		name.FillFromRDNSequence(&rdn)
		if slices.Contains(name.Organization, talosOrg) {
			return true
		}
	}
	return false
}

// tlsProbe does one TLS handshake and records the server's certificate and
// whether it asked for a client certificate.
func tlsProbe(ctx context.Context, endpoint string, trace *connTrace) error {
	var timeout time.Duration // how long it is given, for the error's words
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return dialError(endpoint, err, timeout)
	}
	defer raw.Close()
	cfg := insecureTLS(trace, nil)
	cfg.NextProtos = []string{"h2"}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		if trace.snapshot().certReq {
			return nil // aborted by us on the client-certificate request: a configured node
		}
		if ctx.Err() != nil {
			return &NetworkError{Endpoint: endpoint, Kind: NetTimeout, Timeout: timeout, Detail: "TLS handshake did not complete"}
		}
		return &NetworkError{Endpoint: endpoint, Kind: NetTLS, Detail: "not a Talos TLS API (" + sanitize(err.Error()) + ")"}
	}
	return nil
}

func dialError(endpoint string, err error, timeout time.Duration) error {
	var ne net.Error
	switch {
	case isRefused(err):
		return &NetworkError{Endpoint: endpoint, Kind: NetRefused, Detail: sanitize(err.Error())}
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return &NetworkError{Endpoint: endpoint, Kind: NetTimeout, Timeout: timeout, Detail: sanitize(err.Error())}
	}
	return &NetworkError{Endpoint: endpoint, Kind: NetUnreachable, Detail: sanitize(err.Error())}
}

// LocalPrefixes lists the host's IPv4 subnets worth scanning: up interfaces,
// no loopback or link-local, and no subnet larger than a /22 (1022 hosts).
func LocalPrefixes() ([]netip.Prefix, error) { return LocalPrefixesMinBits(22) }

// LocalPrefixesMinBits is LocalPrefixes with a different size limit: subnets
// with fewer than minBits prefix bits are skipped.
func LocalPrefixesMinBits(minBits int) ([]netip.Prefix, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			p, err := netip.ParsePrefix(ipn.String())
			if err != nil || !p.Addr().Is4() {
				continue
			}
			p = p.Masked()
			if p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() || p.Bits() < minBits || p.Bits() > 30 || seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr().Less(out[j].Addr()) })
	return out, nil
}
