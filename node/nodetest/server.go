// Package nodetest runs a real Talos-like gRPC API on loopback for tests: the
// machinery MachineService and COSI State service behind a self-signed TLS
// certificate, behaving like a Raspberry Pi in Talos maintenance mode.
package nodetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	cosiv1alpha1 "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Options shape the fake node. The zero value is a node in maintenance mode
// on 127.0.0.1 with a random port.
type Options struct {
	Addr string // listen address; default "127.0.0.1:0"

	// Configured makes the node behave like one that already has a config:
	// apid requires a client certificate, so insecure clients fail at TLS.
	Configured bool
	// RequestClientCert asks for a client certificate but accepts a client
	// without one: not Talos maintenance mode (which never asks), a server
	// a maintenance client must not send a config to.
	RequestClientCert bool

	// ApplyErr, if set, is returned by ApplyConfiguration (after Delay),
	// e.g. status.Error(codes.InvalidArgument, "...").
	ApplyErr error
	// Delay holds every ApplyConfiguration answer (the call's context still
	// cancels it, so timeouts in tests stay fast).
	Delay time.Duration
	// SkipValidation accepts any bytes; by default the config is loaded and
	// validated like the maintenance service does.
	SkipValidation bool
	// Warnings are added to the ApplyConfiguration reply.
	Warnings []string

	Hostname     string // default "talos-2ab-4cd"
	MAC          string // default "dc:a6:32:00:00:01" (a Raspberry Pi OUI)
	TalosVersion string // default "v1.13.0"
}

// Request is one ApplyConfiguration call as received.
type Request struct {
	Config     []byte // exact bytes
	Mode       machine.ApplyConfigurationRequest_Mode
	DryRun     bool
	TryTimeout time.Duration
}

// ModeName is the talosctl spelling of the mode ("no-reboot", ...).
func (r Request) ModeName() string {
	return strings.ReplaceAll(strings.ToLower(r.Mode.String()), "_", "-")
}

// Server is a running fake node.
type Server struct {
	machine.UnimplementedMachineServiceServer

	opts     Options
	lis      net.Listener
	grpc     *grpc.Server
	state    state.State
	certDER  []byte
	mu       sync.Mutex
	requests []Request
	versions int
}

// Start runs a fake node until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Hostname == "" {
		opts.Hostname = "talos-2ab-4cd"
	}
	if opts.MAC == "" {
		opts.MAC = "dc:a6:32:00:00:01"
	}
	if opts.TalosVersion == "" {
		opts.TalosVersion = "v1.13.0"
	}

	lis, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		t.Fatalf("nodetest: listen %s: %v", opts.Addr, err)
	}
	host, _, _ := net.SplitHostPort(lis.Addr().String())

	cert, err := selfSigned(host)
	if err != nil {
		lis.Close()
		t.Fatalf("nodetest: certificate: %v", err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if opts.Configured {
		tlsCfg.ClientAuth = tls.RequireAnyClientCert
	} else if opts.RequestClientCert {
		tlsCfg.ClientAuth = tls.RequestClientCert
	}

	s := &Server{opts: opts, lis: lis, certDER: cert.Certificate[0]}
	if s.state, err = s.buildState(); err != nil {
		lis.Close()
		t.Fatalf("nodetest: state: %v", err)
	}

	s.grpc = grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	machine.RegisterMachineServiceServer(s.grpc, s)
	cosiv1alpha1.RegisterStateServer(s.grpc, cosiserver.NewState(s.state))

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.grpc.Serve(lis)
	}()
	t.Cleanup(func() {
		s.grpc.Stop()
		<-done
	})
	return s
}

// Addr is host:port of the node.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Port is the listening port.
func (s *Server) Port() int { return s.lis.Addr().(*net.TCPAddr).Port }

// CertDER is the server certificate (DER).
func (s *Server) CertDER() []byte { return append([]byte(nil), s.certDER...) }

// Requests returns every ApplyConfiguration call received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Config = append([]byte(nil), r.Config...)
		out[i] = r
	}
	return out
}

// VersionCalls counts MachineService.Version calls (discovery probes).
func (s *Server) VersionCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions
}

// ApplyConfiguration behaves like Talos' maintenance service
// (internal/app/maintenance/server.go): only TRY, REBOOT and AUTO, the config
// is loaded and validated, dry run answers without applying.
func (s *Server) ApplyConfiguration(ctx context.Context, in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	req := Request{Config: append([]byte(nil), in.GetData()...), Mode: in.GetMode(), DryRun: in.GetDryRun()}
	if d := in.GetTryModeTimeout(); d != nil {
		req.TryTimeout = d.AsDuration()
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	if s.opts.Delay > 0 {
		select {
		case <-time.After(s.opts.Delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if s.opts.ApplyErr != nil {
		return nil, s.opts.ApplyErr
	}

	switch in.GetMode() {
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_REBOOT, machine.ApplyConfigurationRequest_AUTO:
	default:
		return nil, status.Errorf(codes.Unimplemented, "apply configuration --mode='%s' is not supported in maintenance mode", req.ModeName())
	}

	warnings := append([]string(nil), s.opts.Warnings...)
	if !s.opts.SkipValidation {
		cfg, err := configloader.NewFromBytes(in.GetData())
		if err != nil {
			return nil, status.Errorf(codes.Unknown, "failed to parse config: %s", err)
		}
		w, err := cfg.Validate(metal{})
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "configuration validation failed: %s", err)
		}
		warnings = append(warnings, w...)
	}

	reply := &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{Warnings: warnings, Mode: in.GetMode()}}}
	if in.GetDryRun() {
		reply.Messages[0].ModeDetails = "Dry run summary:\nNode is running in maintenance mode and does not have a config yet."
	}
	return reply, nil
}

// Version is refused without the os:admin role, as in maintenance mode.
func (s *Server) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	s.mu.Lock()
	s.versions++
	s.mu.Unlock()
	return nil, status.Error(codes.Unimplemented, "API is not implemented in maintenance mode")
}

type metal struct{}

func (metal) String() string        { return "metal" }
func (metal) RequiresInstall() bool { return true }
func (metal) InContainer() bool     { return false }

// buildState fills an in-memory COSI state with the non-sensitive resources
// a maintenance node serves: machine status, Talos version, hostname, links,
// system information.
func (s *Server) buildState() (state.State, error) {
	st := state.WrapCore(namespaced.NewState(inmem.Build))
	ctx := context.Background()

	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = runtime.MachineStageMaintenance
	ms.TypedSpec().Status.Ready = false

	ver := runtime.NewVersion()
	ver.TypedSpec().Version = s.opts.TalosVersion
	ver.TypedSpec().Name = "Talos"

	hn := network.NewHostnameStatus(network.NamespaceName, network.HostnameID)
	hn.TypedSpec().Hostname = s.opts.Hostname

	mac, err := net.ParseMAC(s.opts.MAC)
	if err != nil {
		return nil, err
	}
	lo := network.NewLinkStatus(network.NamespaceName, "lo")
	lo.TypedSpec().Type = nethelpers.LinkLoopbck
	lo.TypedSpec().Index = 1
	eth := network.NewLinkStatus(network.NamespaceName, "end0")
	eth.TypedSpec().Type = nethelpers.LinkEther
	eth.TypedSpec().Index = 2
	eth.TypedSpec().HardwareAddr = nethelpers.HardwareAddr(mac)
	eth.TypedSpec().PermanentAddr = nethelpers.HardwareAddr(mac)

	si := hardware.NewSystemInformation(hardware.SystemInformationID)
	si.TypedSpec().Manufacturer = "Raspberry Pi Foundation"
	si.TypedSpec().ProductName = "Raspberry Pi 4 Model B Rev 1.5"

	for _, r := range []resource.Resource{ms, ver, hn, lo, eth, si} {
		if err := st.Create(ctx, r); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// selfSigned makes an in-memory ECDSA certificate for host, like the one a
// maintenance node generates for itself.
func selfSigned(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "maintenance-service"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
