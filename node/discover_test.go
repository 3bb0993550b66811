package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

func TestProbeMaintenanceNode(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Hostname: "talos-pi-1", MAC: "dc:a6:32:12:34:56", TalosVersion: "v1.14.5"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if !n.Maintenance || n.Configured || n.Stage != "maintenance" || n.Hostname != "talos-pi-1" || n.MAC != "dc:a6:32:12:34:56" || n.TalosVersion != "v1.14.5" {
		t.Errorf("node = %+v", n)
	}
	if n.Addr != srv.Addr() || n.IP != netip.MustParseAddr("127.0.0.1") || n.CertFingerprint != spki(t, srv.CertDER()) {
		t.Errorf("node address/cert = %+v", n)
	}
	if srv.VersionCalls() != 1 {
		t.Errorf("Version called %d times", srv.VersionCalls())
	}
	if len(srv.Requests()) != 0 {
		t.Error("probe sent an ApplyConfiguration")
	}
}

func TestProbeConfiguredNode(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Configured: true})
	n, err := node.Probe(context.Background(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if n.Maintenance || !n.Configured || n.CertFingerprint != spki(t, srv.CertDER()) {
		t.Errorf("node = %+v", n)
	}
}

// startHTTPS runs an HTTP/2-capable HTTPS server that is not Talos.
func startHTTPS(t *testing.T, l net.Listener) *httptest.Server {
	https := httptest.NewUnstartedServer(http.NotFoundHandler())
	if l != nil {
		https.Listener.Close()
		https.Listener = l
	}
	https.EnableHTTP2 = true
	https.Config.ErrorLog = log.New(io.Discard, "", 0)
	https.StartTLS()
	t.Cleanup(https.Close)
	return https
}

// startPlainGRPC runs a TLS gRPC server without any Talos service.
func startPlainGRPC(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert := testCert(t)
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func TestProbeRejectsNonTalos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	https := startHTTPS(t, nil)
	if n, err := node.Probe(ctx, https.Listener.Addr().String()); err == nil {
		t.Errorf("an HTTPS server was taken for Talos: %+v", n)
	} else if !strings.Contains(err.Error(), "not a Talos API") {
		t.Errorf("HTTPS server: err = %v, want 'not a Talos API'", err)
	}
	if n, err := node.Probe(ctx, startPlainGRPC(t)); err == nil {
		t.Errorf("a non-Talos gRPC server was taken for Talos: %+v", n)
	} else if !strings.Contains(err.Error(), "not a Talos API") {
		t.Errorf("gRPC server: err = %v, want 'not a Talos API'", err)
	}
}

// An mTLS service that is not Talos (its certificate and the CA it asks
// for are no Talos OS CA) is not a node, configured or not: the probe
// says so, and a scan does not list it. Before, every server that asked
// for a client certificate was "a configured Talos node".
func TestProbeMTLSNonTalosIsNotANode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, auth := range []tls.ClientAuthType{tls.RequireAnyClientCert, tls.RequestClientCert} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{testCert(t)}, ClientAuth: auth})))
		go s.Serve(l)
		t.Cleanup(s.Stop)
		n, err := node.Probe(ctx, l.Addr().String())
		if err == nil || !strings.Contains(err.Error(), "not a Talos node") {
			t.Errorf("client auth %v: node %+v, err %v; want 'not a Talos node'", auth, n, err)
		}
	}
}

func TestDiscoverLoopback(t *testing.T) {
	port := testkit.FreePort(t, "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.1", "127.0.0.5", "127.0.0.6")
	at := func(h string) string { return net.JoinHostPort(h, strconv.Itoa(port)) }

	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.2"), Hostname: "pi-maint"})
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.3"), Configured: true})
	// 127.0.0.4: TLS, but not Talos.
	l, err := net.Listen("tcp", at("127.0.0.4"))
	if err != nil {
		t.Fatal(err)
	}
	startHTTPS(t, l)

	var mu sync.Mutex
	var calls, lastDone, lastTotal int
	start := time.Now()
	nodes, err := node.Discover(context.Background(), node.DiscoverOptions{
		Prefixes:     []netip.Prefix{netip.MustParsePrefix("127.0.0.0/29")}, // hosts .1-.6
		Port:         port,
		DialTimeout:  300 * time.Millisecond,
		ProbeTimeout: 3 * time.Second,
		Concurrency:  4,
		Progress: func(done, total int) {
			mu.Lock()
			calls++
			lastDone, lastTotal = done, total
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("discovery took %v", d)
	}
	if len(nodes) != 2 {
		t.Fatalf("found %d nodes, want 2: %+v", len(nodes), nodes)
	}
	if nodes[0].Addr != at("127.0.0.2") || !nodes[0].Maintenance || nodes[0].Hostname != "pi-maint" {
		t.Errorf("node 0 = %+v", nodes[0])
	}
	if nodes[1].Addr != at("127.0.0.3") || nodes[1].Maintenance || !nodes[1].Configured {
		t.Errorf("node 1 = %+v", nodes[1])
	}
	if calls != 6 || lastDone != 6 || lastTotal != 6 {
		t.Errorf("progress: %d calls, last %d/%d; want 6 calls ending 6/6", calls, lastDone, lastTotal)
	}
}

func TestDiscoverRefusesHugeRanges(t *testing.T) {
	for _, p := range []string{"10.0.0.0/8", "192.168.0.0/16", "127.0.0.0/21"} {
		_, err := node.Discover(context.Background(), node.DiscoverOptions{Prefixes: []netip.Prefix{netip.MustParsePrefix(p)}})
		if !errors.Is(err, node.ErrTooManyHosts) {
			t.Errorf("%s: err = %v, want ErrTooManyHosts", p, err)
		}
	}
	// The cap also covers the sum of several prefixes.
	_, err := node.Discover(context.Background(), node.DiscoverOptions{
		Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/27"), netip.MustParsePrefix("127.0.1.0/27")},
		MaxHosts: 40,
	})
	if !errors.Is(err, node.ErrTooManyHosts) {
		t.Errorf("sum over the cap: err = %v", err)
	}
	if _, err := node.Discover(context.Background(), node.DiscoverOptions{}); err == nil {
		t.Error("empty prefix list accepted")
	}
}

func TestDiscoverCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err := node.Discover(ctx, node.DiscoverOptions{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.3.0/24")}, Port: 1})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestLocalPrefixes(t *testing.T) {
	ps, err := node.LocalPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Addr().IsLoopback() || !p.Addr().Is4() || p.Bits() < 22 || p != p.Masked() {
			t.Errorf("unexpected prefix %v", p)
		}
	}
	t.Logf("local prefixes (not scanned): %v", ps)
}

func testCert(t *testing.T) tls.Certificate {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// A port that accepts and never answers must not hang a Probe whose
// context has no deadline.
func TestProbeSilentPortWithoutDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := node.Probe(context.Background(), l.Addr().String())
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, node.ErrNetwork) {
			t.Errorf("err = %v, want a network error", err)
		}
	case <-time.After(node.DefaultProbeTimeout + 5*time.Second):
		t.Fatalf("Probe still running after %v", time.Since(start))
	}
}
