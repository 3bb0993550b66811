package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/talosflash/talosflash/internal/userfile"
)

// MaxTalosconfigSize bounds a talosconfig read from disk (a few KiB per context).
const MaxTalosconfigSize = 1 << 20

// ErrTalosconfig marks a talosconfig that cannot be used (missing context,
// no client certificate, unreadable keys).
var ErrTalosconfig = errors.New("unusable talosconfig")

// Talosconfig is one context of a talosconfig (`talosctl gen config` writes
// it next to the machine configs): the cluster CA and an admin client
// certificate. It never prints its key material: String, errors and
// logs name the file and context only.
type Talosconfig struct {
	Path      string
	Context   string
	Endpoints []string
	Nodes     []string
	// Roles are the Talos roles of the client certificate (its Organization), e.g. os:admin.
	Roles []string

	roots *x509.CertPool
	cert  tls.Certificate
}

// String names the config without secrets.
func (t *Talosconfig) String() string {
	return fmt.Sprintf("talosconfig %s (context %q)", t.Path, t.Context)
}

// LoadTalosconfig reads the talosconfig at path (bounded, regular file) and
// selects contextName ("" = the file's current context). Unlike
// clientconfig.Open it never creates a missing file.
func LoadTalosconfig(path, contextName string) (*Talosconfig, error) {
	data, err := userfile.Read(path, MaxTalosconfigSize)
	if err != nil {
		return nil, fmt.Errorf("talosconfig: %w", err)
	}
	t, err := ParseTalosconfig(data, contextName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// ParseTalosconfig parses a talosconfig with machinery's clientconfig and
// builds the mTLS credentials of one context. Errors say what is wrong
// without quoting the file (it holds the client key).
func ParseTalosconfig(data []byte, contextName string) (*Talosconfig, error) {
	cfg, err := clientconfig.FromBytes(data)
	if err != nil {
		// The YAML decoder may quote the offending value: keep only the line.
		where := ""
		if l := lineOf(err.Error()); l > 0 {
			where = fmt.Sprintf(" (line %d)", l)
		}
		return nil, fmt.Errorf("%w: not a valid talosconfig YAML%s", ErrTalosconfig, where)
	}
	name := contextName
	if name == "" {
		name = cfg.Context
	}
	if name == "" {
		return nil, fmt.Errorf("%w: no current context; pass --context", ErrTalosconfig)
	}
	c, ok := cfg.Contexts[name]
	if !ok || c == nil {
		names := make([]string, 0, len(cfg.Contexts))
		for n := range cfg.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w: no context %q (contexts: %s)", ErrTalosconfig, name, strings.Join(names, ", "))
	}
	t := &Talosconfig{Context: name, Endpoints: slices.Clone(c.Endpoints), Nodes: slices.Clone(c.Nodes)}
	if c.Crt == "" || c.Key == "" {
		if c.Auth.SideroV1 != nil || c.Auth.Basic != nil {
			return nil, fmt.Errorf("%w: context %q authenticates through Omni/SideroV1 or basic auth, which talosflash does not support; use a talosconfig from `talosctl gen config`", ErrTalosconfig, name)
		}
		return nil, fmt.Errorf("%w: context %q has no client certificate (crt and key)", ErrTalosconfig, name)
	}
	if c.CA == "" {
		return nil, fmt.Errorf("%w: context %q has no CA, so the node cannot be authenticated", ErrTalosconfig, name)
	}
	ca, err1 := base64.StdEncoding.DecodeString(c.CA)
	crt, err2 := base64.StdEncoding.DecodeString(c.Crt)
	key, err3 := base64.StdEncoding.DecodeString(c.Key)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("%w: context %q: ca, crt or key is not base64", ErrTalosconfig, name)
	}
	t.roots = x509.NewCertPool()
	if !t.roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%w: context %q: ca holds no PEM certificate", ErrTalosconfig, name)
	}
	t.cert, err = tls.X509KeyPair(crt, key)
	if err != nil {
		// tls' messages name the problem, never the bytes.
		return nil, fmt.Errorf("%w: context %q: client certificate and key: %s", ErrTalosconfig, name, sanitize(err.Error()))
	}
	if leaf, err := x509.ParseCertificate(t.cert.Certificate[0]); err == nil {
		// Any string the certificate's issuer chose: printable and
		// bounded from here on, as what a node reports.
		for _, o := range leaf.Subject.Organization[:min(len(leaf.Subject.Organization), maxListItems)] {
			t.Roles = append(t.Roles, printable(o, maxName))
		}
	}
	return t, nil
}

// IsAdmin reports whether the client certificate carries the os:admin role
// (Bootstrap and Upgrade need it).
func (t *Talosconfig) IsAdmin() bool { return slices.Contains(t.Roles, "os:admin") }

// tlsConfig is what machinery's buildTLSConfig makes of a context (the CA
// as roots, the client certificate), plus tracing for error messages.
func (t *Talosconfig) tlsConfig(trace *connTrace) *tls.Config {
	return &tls.Config{
		RootCAs:      t.roots,
		Certificates: []tls.Certificate{t.cert},
		MinVersion:   tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			trace.set(func(tr *connTrace) {
				tr.tlsDone = true
				if len(cs.PeerCertificates) > 0 {
					tr.serverCert = cs.PeerCertificates[0].Raw
				}
			})
			return nil
		},
	}
}

// newSecureClient is a machinery client to one node authenticated with the
// talosconfig (like `talosctl -e IP -n IP`).
func newSecureClient(ctx context.Context, endpoint string, t *Talosconfig, trace *connTrace) (*client.Client, error) {
	return client.New(ctx,
		client.WithTLSConfig(t.tlsConfig(trace)),
		client.WithEndpoints(endpoint),
		client.WithGRPCDialOptions(grpc.WithContextDialer(trace.dial),
			// A rebooting node is away for minutes: retry its address every few
			// seconds rather than gRPC's default backoff of up to two minutes.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
				MinConnectTimeout: 10 * time.Second,
			})),
	)
}

// session is one authenticated connection to a node plus what is needed to
// explain its failures.
type session struct {
	endpoint string
	timeout  time.Duration // per-call bound, for messages
	trace    *connTrace
	c        *client.Client
}

func dialSecure(ctx context.Context, endpoint string, t *Talosconfig) (*session, error) {
	ep, err := NormalizeEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	s := &session{endpoint: ep, trace: &connTrace{}}
	s.c, err = newSecureClient(ctx, ep, t, s.trace)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", ep, err)
	}
	return s, nil
}

func (s *session) Close() { _ = s.c.Close() }

// err explains a failed call of op on an authenticated connection.
func (s *session) err(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	tr := s.trace.snapshot()
	e := classify(ctx, s.endpoint, s.timeout, err, s.trace)
	var re *RefusedError
	if errors.As(e, &re) {
		re.Op = op
	}
	var ne *NetworkError
	if errors.As(e, &ne) {
		switch {
		case ne.Kind == NetRefused:
			ne.Kind, ne.Detail = NetUnreachable, "connection refused (node rebooting, or Talos not listening yet)"
		case tr.dialed && !tr.tlsDone && strings.Contains(err.Error(), "unknown authority"):
			ne.Detail = "the node's certificate is not signed by the talosconfig's CA (another cluster's talosconfig, or the node is still in maintenance mode)"
		case tr.dialed && strings.Contains(err.Error(), "bad certificate"):
			ne.Detail = "the node rejected the talosconfig's client certificate (another cluster's talosconfig?)"
		}
	}
	return e
}
