package node

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultPort is the Talos API port (apid, or the maintenance service).
const DefaultPort = 50000

// NormalizeEndpoint is ParseEndpoint's host:port text: the form every
// call of this package takes.
func NormalizeEndpoint(ep string) (string, error) {
	e, err := ParseEndpoint(ep)
	if err != nil {
		return "", err
	}
	return e.String(), nil
}

// displayEndpoint is a user-typed address fit for a message: user info
// redacted, control characters escaped, length bounded.
func displayEndpoint(ep string) string {
	if i := strings.LastIndex(ep, "@"); i >= 0 {
		ep = redacted + ep[i:]
	}
	return printable(ep, maxName)
}

// connTrace records what happened on the wire, so a failed call can say
// whether TCP, TLS or the API failed (gRPC folds all of them into Unavailable).
type connTrace struct {
	mu         sync.Mutex
	dialErr    error
	dialed     bool
	tlsDone    bool
	certReq    bool     // the server asked for a client certificate (configured apid does)
	clientCAs  [][]byte // the CAs it accepts client certificates from (DER subjects)
	serverCert []byte   // leaf certificate, DER
	pinFailed  string   // fingerprint of a certificate that matched no pin
}

// dial is the clients' TCP dialer: it records whether the node answered,
// so errors can tell "nothing listens" from a TLS or API failure.
func (t *connTrace) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	t.set(func(t *connTrace) {
		if err != nil {
			t.dialErr = err
		} else {
			t.dialed = true
		}
	})
	return c, err
}

func (t *connTrace) set(f func(*connTrace)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

func (t *connTrace) snapshot() connTrace {
	t.mu.Lock()
	defer t.mu.Unlock()
	return connTrace{dialErr: t.dialErr, dialed: t.dialed, tlsDone: t.tlsDone, certReq: t.certReq, clientCAs: t.clientCAs, serverCert: t.serverCert, pinFailed: t.pinFailed}
}

// insecureTLS is what `talosctl --insecure` uses: encryption without server
// verification (a maintenance node only has a self-signed certificate).
// With pins, the leaf's SPKI fingerprint must match one of them, like
// `talosctl --insecure --cert-fingerprint`.
func insecureTLS(trace *connTrace, pins []string) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // maintenance mode has no trust anchor yet; same as talosctl --insecure
		MinVersion:         tls.VersionTLS12,
		// Maintenance mode never asks for a client certificate; a server
		// that does is a configured node (or not Talos at all): abort the
		// handshake so nothing, least of all a machine config, is sent to it.
		GetClientCertificate: func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			trace.set(func(t *connTrace) { t.certReq, t.clientCAs = true, cri.AcceptableCAs })
			return nil, errClientCertRequested
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			var der []byte
			if len(cs.PeerCertificates) > 0 {
				der = cs.PeerCertificates[0].Raw
			}
			fp := CertFingerprint(der)
			if len(pins) > 0 && !slices.Contains(pins, fp) {
				trace.set(func(t *connTrace) { t.pinFailed = fp })
				return fmt.Errorf("certificate fingerprint %s matches no pinned fingerprint", fp)
			}
			trace.set(func(t *connTrace) {
				t.tlsDone = true
				t.serverCert = der
			})
			return nil
		},
	}
}

var errClientCertRequested = errors.New("the server asks for a client certificate: not a node in maintenance mode")

// newInsecureClient builds a real machinery client the way talosctl's
// WithClientMaintenance does (client.WithTLSConfig + client.WithEndpoints),
// plus a dialer that records the TCP outcome.
func newInsecureClient(ctx context.Context, endpoint string, trace *connTrace, pins []string) (*client.Client, error) {
	return client.New(ctx,
		client.WithTLSConfig(insecureTLS(trace, pins)),
		client.WithEndpoints(endpoint),
		client.WithGRPCDialOptions(grpc.WithContextDialer(trace.dial)),
	)
}

// classify maps a gRPC error to NetworkError / RefusedError / context errors.
func classify(ctx context.Context, endpoint string, timeout time.Duration, err error, trace *connTrace) error {
	if err == nil {
		return nil
	}
	st, _ := status.FromError(err)
	tr := trace.snapshot()
	netErr := func(kind NetworkKind, detail string) error {
		return &NetworkError{Endpoint: endpoint, Kind: kind, Timeout: timeout, Detail: sanitize(detail)}
	}

	switch st.Code() {
	case codes.Canceled:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return netErr(NetUnreachable, st.Message())
	case codes.DeadlineExceeded:
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ctx.Err()
		}
		return netErr(NetTimeout, st.Message())
	case codes.Unavailable:
		switch {
		case tr.pinFailed != "":
			// The fingerprint is a hash of a public key: safe to show unsanitized.
			return &NetworkError{Endpoint: endpoint, Kind: NetTLS,
				Detail: "the node's certificate fingerprint " + tr.pinFailed + " is not the pinned one (another machine answers at this address, or the node rebooted and made a new certificate)"}
		case tr.dialErr != nil && !tr.dialed:
			if isRefused(tr.dialErr) {
				return netErr(NetRefused, tr.dialErr.Error())
			}
			var ne net.Error
			if errors.As(tr.dialErr, &ne) && ne.Timeout() {
				return netErr(NetTimeout, tr.dialErr.Error())
			}
			return netErr(NetUnreachable, tr.dialErr.Error())
		case tr.dialed && !tr.tlsDone:
			return netErr(NetTLS, "the port does not speak Talos' TLS API ("+tlsReason(st.Message())+")")
		case tr.certReq && talosIssued(tr.serverCert, tr.clientCAs):
			return netErr(NetTLS, "the node already has a config and requires a client certificate (use talosctl with its talosconfig)")
		case tr.certReq:
			return netErr(NetTLS, "asks for a client certificate but is not a Talos node (neither its certificate nor the CA it asks for is a Talos CA)")
		}
		return netErr(NetUnreachable, st.Message())
	}

	// The node's message may quote the config (a loader error dumps the
	// unknown keys with their values): the same redaction as local errors.
	msg := decodeCause(st.Message())
	if msg == "" {
		msg = st.Code().String()
	}
	return &RefusedError{
		Endpoint:        endpoint,
		Code:            st.Code(),
		Message:         msg,
		UnsupportedMode: st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "mode"),
	}
}

// tlsReason keeps the interesting tail of gRPC's handshake error.
func tlsReason(msg string) string {
	if i := strings.Index(msg, "tls: "); i >= 0 {
		return strings.Trim(msg[i:], `"`)
	}
	if strings.Contains(msg, "EOF") {
		return "the server closed the connection during the handshake"
	}
	return msg
}

// CertFingerprint is the SPKI fingerprint of a DER certificate as Talos
// prints it on the maintenance console and `talosctl --cert-fingerprint`
// takes it: base64(SHA-256(SubjectPublicKeyInfo)). "" if der is not a certificate.
func CertFingerprint(der []byte) string {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
