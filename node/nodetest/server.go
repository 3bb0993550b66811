// Package nodetest runs a real Talos-like gRPC API on loopback for tests and
// for trying the app without hardware (./node/nodetest/fakenode): the
// machinery MachineService and COSI State service behind a self-signed TLS
// certificate, behaving like a Raspberry Pi in Talos maintenance mode of
// either generation:
//
//   - Talos >= 1.13 (the default, v1.14.5; maintenance and regular APIs
//     unified): Version answers; every apply mode is accepted (REBOOT and
//     AUTO answered as NO_REBOOT, STAGED, TRY); parse and validation errors
//     are InvalidArgument with the loader's raw message; dry run answers
//     "Dry run summary:" with a diff; a second apply while one is running
//     gets FailedPrecondition (1.14). A 1.14 node decides on the config as
//     Talos 1.14 does (talos114.go: every kind it registers, its rules, the
//     two rc.1-only ones behind Options.RC1Rules), answers admin-only calls
//     PermissionDenied "not authorized", serves ImageFactorySchematics and
//     names ExtensionStatuses by layer index; a 1.13 node uses machinery v1.13.
//   - Talos <= 1.12 (Options.Legacy): only TRY/REBOOT/AUTO (others
//     Unimplemented), Version Unimplemented for non-admins, reply mode unset,
//     parse errors Unknown, validation errors InvalidArgument
//     "configuration validation failed: ...".
//
// Both serve non-sensitive COSI resources (machine status, version, hostname,
// links, system information and, for a factory image, ExtensionStatuses with
// the virtual "schematic" extension) with their ResourceDefinitions, and
// refuse sensitive ones and writes, as internal/app/resources/access.go does
// (resources.go). A configured node (mtls.go) lives its boot as Talos 1.14
// does (sequence.go: services, events, logs, the boot's end or its
// BootTimeout), streams Events, Logs and Dmesg (events.go), answers dry
// runs with 1.14's diff of every document (diff114.go) and keeps its
// hostname by Talos' layers (hostname.go).
package nodetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"math/big"
	"net"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	cosiv1alpha1 "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	configpkg "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configdiff"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/extensions"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/talosflash/talosflash/node/internal/talos114"
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

	Hostname     string // default "talos-2ab-4cd"; an FQDN is split as Talos does (Hostname + Domainname), otherwise served as is (a rogue node may send anything)
	Arch         string // default "arm64"
	MAC          string // default "dc:a6:32:00:00:01" (a Raspberry Pi OUI)
	TalosVersion string // default "v1.14.5", or "v1.12.6" with Legacy

	// Legacy models Talos <= 1.12 maintenance mode (see the package comment).
	Legacy bool
	// RC1Rules turns on the two rules of Talos v1.14.0-rc.1
	// (UnattendedInstallConfig without provisioning.diskSelector.match;
	// KubeProxyConfig on a worker), which the 1.14 sources keep. Off by
	// default so tests can model both answers; see rules114.
	RC1Rules bool
	// FactoryURL is the API URL of the factory that built the image, served
	// by a 1.14 node as ImageFactorySchematics (with Schematic set); default
	// "https://factory.talos.dev".
	FactoryURL string
	// Schematic is the Image Factory schematic of the booted image: served as
	// ExtensionStatuses (the virtual "schematic" extension with the ID and
	// the YAML, plus one entry per official extension). Nil: no extension
	// statuses at all (an image not from the factory, or older Talos).
	Schematic *schematic.Schematic
	// ExtensionStatuses, if set, are served verbatim instead of the ones
	// derived from Schematic (a node with odd or hostile metadata).
	ExtensionStatuses []extensions.Metadata
	// Gate, if set, holds every ApplyConfiguration until it can receive from
	// it (or the call is cancelled): lets a test overlap two applies
	// deterministically.
	Gate <-chan struct{}
	// Logf, if set, gets one line per API call (never config content).
	Logf func(format string, args ...any)
	// Card, if set, boots the node from a flashed card or image file: its
	// address (127.0.0.0/8 only), hostname and image (cardboot.go).
	Card string
	// BootConfig makes the node leave maintenance mode as a real one does
	// after an accepted apply that applies now (auto, no-reboot, reboot; not
	// staged, try or a dry run): the maintenance API stops and, after
	// BootDelay, a configured Node (mtls.go) serves on the same address with
	// the config's machine.ca, machine type, the node's hostname and
	// version (bootconfig.go). A worker's certificate needs the CA key: it
	// comes up once a control plane fake of this process runs with that CA.
	BootConfig bool
	// BootDelay is how long the address is silent in between; default
	// DefaultBootDelay.
	BootDelay time.Duration
	// Clock and BootTimeout are the configured node's (NodeOptions): its
	// time since boot and when a boot that cannot finish reboots.
	Clock       *Clock
	BootTimeout time.Duration
	// CNI is the configured node's (NodeOptions.CNI): the user installs a
	// CNI as soon as the cluster's API runs.
	CNI bool
	// CoreDNS is the configured node's (NodeOptions.CoreDNS).
	CoreDNS bool
}

// Talos versions the fake reports by default.
const (
	DefaultVersion = "v1.14.5"
	LegacyVersion  = "v1.12.6"
	arch           = "arm64"
)

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
	done     chan struct{}
	applying sync.Mutex // 1.14: one apply at a time
	mu       sync.Mutex
	requests []Request
	versions int

	// BootConfig (bootconfig.go), under mu.
	quit       chan struct{} // closed by Close
	booted     chan struct{} // closed when boot ends (node up, or not)
	booting    bool
	closed     bool
	node       *Node
	unregister func()
}

// Start runs a fake node until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a fake node; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Card != "" {
		if _, err := bootFromCard(&opts); err != nil {
			return nil, err
		}
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Hostname == "" {
		opts.Hostname = "talos-2ab-4cd"
	}
	if opts.Arch == "" {
		opts.Arch = arch
	}
	if opts.MAC == "" {
		opts.MAC = "dc:a6:32:00:00:01"
	}
	if opts.TalosVersion == "" {
		opts.TalosVersion = DefaultVersion
		if opts.Legacy {
			opts.TalosVersion = LegacyVersion
		}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.BootDelay <= 0 {
		opts.BootDelay = DefaultBootDelay
	}

	lis, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", opts.Addr, err)
	}
	host, _, _ := net.SplitHostPort(lis.Addr().String())

	cert, err := selfSigned(host)
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("certificate: %w", err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if opts.Configured {
		// As apid with a config: a certificate from the cluster's OS CA
		// (Organization "talos"), client certificates from that CA only.
		pki, err := NewPKI()
		if err == nil {
			cert, err = pki.serverCert(host)
		}
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("configured node's PKI: %w", err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(pki.caCert)
		tlsCfg.Certificates, tlsCfg.ClientAuth, tlsCfg.ClientCAs = []tls.Certificate{cert}, tls.RequireAndVerifyClientCert, pool
	} else if opts.RequestClientCert {
		tlsCfg.ClientAuth = tls.RequestClientCert
	}

	s := &Server{opts: opts, lis: lis, certDER: cert.Certificate[0], done: make(chan struct{}),
		quit: make(chan struct{}), booted: make(chan struct{})}
	if s.state, err = s.buildState(); err != nil {
		lis.Close()
		return nil, fmt.Errorf("state: %w", err)
	}

	s.grpc = grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	machine.RegisterMachineServiceServer(s.grpc, s)
	if !opts.Legacy {
		machine.RegisterLifecycleServiceServer(s.grpc, maintenanceLifecycle{s: s})
	}
	// Reads go through the node's access policy: non-sensitive types only, no writes.
	cosiv1alpha1.RegisterStateServer(s.grpc, cosiserver.NewState(state.WrapCore(state.Filter(s.state, accessPolicy114(s.state, maintenanceAdmin)))))

	go func() {
		defer close(s.done)
		_ = s.grpc.Serve(lis)
	}()
	return s, nil
}

// Close stops the node (and the configured node it became) and waits for
// its servers to end.
func (s *Server) Close() {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	booting := s.booting
	s.mu.Unlock()
	if first {
		close(s.quit)
	}
	s.grpc.Stop()
	<-s.done
	if booting {
		<-s.booted
	}
	s.mu.Lock()
	n, unregister := s.node, s.unregister
	s.mu.Unlock()
	if unregister != nil {
		unregister()
	}
	if n != nil {
		n.Close()
	}
}

// Booted is closed once a BootConfig node has come up configured after an
// apply (Node is then set), or failed to (see Logf).
func (s *Server) Booted() <-chan struct{} { return s.booted }

// Node is the configured node this one became (BootConfig), else nil.
func (s *Server) Node() *Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// CertFingerprint is the SPKI fingerprint the node's console would print.
func (s *Server) CertFingerprint() string {
	cert, err := x509.ParseCertificate(s.certDER)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// SchematicID is the ID of Options.Schematic ("" without one).
func (s *Server) SchematicID() string {
	if s.opts.Schematic == nil {
		return ""
	}
	id, _ := s.opts.Schematic.ID()
	return id
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

// ApplyConfiguration behaves like the maintenance API of the node's
// generation (see the package comment). Every call is recorded, byte for byte.
func (s *Server) ApplyConfiguration(ctx context.Context, in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	req := Request{Config: append([]byte(nil), in.GetData()...), Mode: in.GetMode(), DryRun: in.GetDryRun()}
	if d := in.GetTryModeTimeout(); d != nil {
		req.TryTimeout = d.AsDuration()
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	s.opts.Logf("ApplyConfiguration: %d bytes, mode %s, dry run %v", len(req.Config), req.ModeName(), req.DryRun)

	if !s.opts.Legacy {
		if !s.applying.TryLock() {
			return nil, status.Error(codes.FailedPrecondition, "another apply configuration is already in progress")
		}
		defer s.applying.Unlock()
	}
	if s.opts.Gate != nil {
		select {
		case <-s.opts.Gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
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
	var (
		reply *machine.ApplyConfigurationResponse
		err   error
	)
	if s.opts.Legacy {
		reply, err = s.applyLegacy(in)
	} else {
		reply, err = s.applyUnified(in)
	}
	if err == nil && s.opts.BootConfig && bootsConfig(in) {
		s.startBoot(in.GetData())
	}
	return reply, err
}

// startBoot leaves maintenance mode with the applied config (once).
func (s *Server) startBoot(data []byte) {
	bc, err := parseBootConfig(data)
	if err != nil {
		s.opts.Logf("boot: staying in maintenance: %v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.booting || s.closed {
		return
	}
	s.booting = true
	go s.boot(bc, data)
}

// applyLegacy is internal/app/maintenance/server.go of Talos <= 1.12.
func (s *Server) applyLegacy(in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	switch in.GetMode() {
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_REBOOT, machine.ApplyConfigurationRequest_AUTO:
	default:
		return nil, status.Errorf(codes.Unimplemented, "apply configuration --mode='%s' is not supported in maintenance mode",
			strings.ReplaceAll(strings.ToLower(in.GetMode().String()), "_", "-"))
	}
	var warnings []string
	if !s.opts.SkipValidation {
		cfg, err := configloader.NewFromBytes(in.GetData())
		if err != nil {
			return nil, fmt.Errorf("failed to parse config: %w", err) // gRPC: Unknown
		}
		w, err := cfg.Validate(metal{})
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "configuration validation failed: %s", err)
		}
		warnings = w
	}
	warnings = append(warnings, s.opts.Warnings...)
	reply := &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{Warnings: warnings}}} // mode left unset
	if in.GetDryRun() {
		reply.Messages[0].ModeDetails = "Dry run summary:\nNode is running in maintenance mode and does not have a config yet."
	}
	return reply, nil
}

// applyUnified is ApplyConfiguration of Talos >= 1.13
// (internal/app/machined/internal/server/v1alpha1) for a node without a config.
func (s *Server) applyUnified(in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	var (
		provider configpkg.Provider
		warnings []string
	)
	if !s.opts.SkipValidation && s.is114() {
		res, w, loadErr, validateErr := validate114(in.GetData(), s.opts.RC1Rules)
		if loadErr != "" {
			return nil, status.Error(codes.InvalidArgument, loadErr)
		}
		if validateErr != "" {
			return nil, status.Error(codes.InvalidArgument, validateErr)
		}
		provider, warnings = res.Provider, w
	} else if !s.opts.SkipValidation {
		// Talos 1.13: its own machinery, which this module links.
		cfg, err := configloader.NewFromBytes(in.GetData())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		w, err := cfg.Validate(metal{})
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		provider, warnings = cfg, w
	}
	warnings = append(warnings, s.opts.Warnings...)

	mode := in.GetMode()
	var details string
	switch mode {
	case machine.ApplyConfigurationRequest_REBOOT, machine.ApplyConfigurationRequest_AUTO:
		mode = machine.ApplyConfigurationRequest_NO_REBOOT
		details = "Applied configuration without a reboot"
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_NO_REBOOT:
		details = "Applied configuration without a reboot"
	case machine.ApplyConfigurationRequest_STAGED:
		details = "Staged configuration to be applied after the next reboot"
	default:
		return nil, status.Errorf(codes.InvalidArgument, "incorrect mode '%s' specified for the apply config call", in.GetMode().String())
	}

	if in.GetDryRun() {
		diff := "No changes."
		switch {
		case s.is114():
			// Every document, as a 1.14 node encodes it (diff114.go).
			diff = diff114(nil, in.GetData())
		case provider != nil:
			if d, err := configdiff.DiffConfigs(nil, provider); err == nil && d != "" {
				diff = d
			}
		}
		return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{
			Mode:        mode,
			ModeDetails: fmt.Sprintf("Dry run summary:\n%s (skipped in dry-run).\nConfig diff:\n\n%s", details, diff),
		}}}, nil
	}
	if mode == machine.ApplyConfigurationRequest_TRY {
		timeout := time.Minute
		if in.GetTryModeTimeout() != nil {
			timeout = in.GetTryModeTimeout().AsDuration()
		}
		details += fmt.Sprintf("\nThe config is applied in 'try' mode and will be automatically reverted back in %s", timeout)
	}
	return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{Mode: mode, Warnings: warnings, ModeDetails: details}}}, nil
}

// is114 reports whether the node models Talos >= 1.14 (the config rules of
// talos114.go, ImageFactorySchematics).
func (s *Server) is114() bool {
	if s.opts.Legacy {
		return false
	}
	v, err := semver.ParseTolerant(s.opts.TalosVersion)
	return err != nil || v.GE(semver.Version{Major: 1, Minor: 14})
}

// Version answers on Talos >= 1.13; Talos <= 1.12 maintenance mode refuses
// it to clients without the os:admin role.
func (s *Server) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	s.mu.Lock()
	s.versions++
	s.mu.Unlock()
	if s.opts.Legacy {
		return nil, status.Error(codes.Unimplemented, "API is not implemented in maintenance mode")
	}
	return versionReply(s.opts.TalosVersion, s.opts.Arch, false), nil
}

// versionReply is v1alpha1_server.go Version: machinery's version.NewVersion
// (tag, commit SHA, Go version and OS of the build, architecture), the
// platform, and the features of a node with a config (RBAC on).
func versionReply(tag, arch string, configured bool) *machine.VersionResponse {
	sum := sha256.Sum256([]byte(tag)) // a made-up commit, stable per tag
	v := &machine.Version{
		Version:  &machine.VersionInfo{Tag: tag, Sha: fmt.Sprintf("%x", sum[:4]), GoVersion: goruntime.Version(), Os: "linux", Arch: arch},
		Platform: &machine.PlatformInfo{Name: "metal", Mode: "metal"},
	}
	if configured {
		v.Features = &machine.FeaturesInfo{Rbac: true}
	}
	return &machine.VersionResponse{Messages: []*machine.Version{v}}
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
	if err := registerDefinitions(ctx, st); err != nil {
		return nil, err
	}

	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = runtime.MachineStageMaintenance
	ms.TypedSpec().Status.Ready = false

	ver := runtime.NewVersion()
	ver.TypedSpec().Version = s.opts.TalosVersion
	ver.TypedSpec().Name = "Talos"

	// Talos splits an FQDN at the first dot: HostnameStatus.Hostname is the
	// short name, Domainname the rest (rules114: hostname split).
	hn := network.NewHostnameStatus(network.NamespaceName, network.HostnameID)
	hn.TypedSpec().Hostname, hn.TypedSpec().Domainname = splitFQDN(s.opts.Hostname)

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

	resources := []resource.Resource{ms, ver, hn, lo, eth, si}
	layers := s.opts.ExtensionStatuses
	if sc := s.opts.Schematic; sc != nil && layers == nil {
		id, err := sc.ID()
		if err != nil {
			return nil, err
		}
		yml, err := sc.Marshal()
		if err != nil {
			return nil, err
		}
		// Layer order as on a node: the extensions, then the factory's virtual one.
		for _, e := range sc.Customization.SystemExtensions.OfficialExtensions {
			layers = append(layers, extensions.Metadata{Name: e[strings.LastIndex(e, "/")+1:], Version: "v1.0.0", Author: "Sidero Labs"})
		}
		layers = append(layers, extensions.Metadata{Name: "schematic", Version: id, Author: "Image Factory (" + s.factoryURL() + ")",
			Description: "Image Factory schematic", ExtraInfo: string(yml)})
	}
	for i, md := range layers {
		// Layer IDs: the layer image name without ".sqsh", and the imager
		// names each extension's image by its index, the factory's
		// schematic last (rules114: extension status IDs).
		id := strconv.Itoa(i)
		es := runtime.NewExtensionStatus(runtime.NamespaceName, id)
		es.TypedSpec().Image = id + ".sqsh"
		es.TypedSpec().Metadata = md
		resources = append(resources, es)
		// 1.14: ImageFactorySchematicController surfaces the schematic
		// extension (its version, and flavor + URL from its author).
		if s.is114() && md.Name == "schematic" && md.Version != "" {
			ifs := talos114.NewImageFactorySchematic()
			ifs.TypedSpec().SchematicID = md.Version
			ifs.TypedSpec().Flavor, ifs.TypedSpec().APIURL = parseAuthor(md.Author)
			resources = append(resources, ifs)
		}
	}
	for _, r := range resources {
		if err := st.Create(ctx, r); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (s *Server) factoryURL() string {
	if s.opts.FactoryURL != "" {
		return s.opts.FactoryURL
	}
	return "https://factory.talos.dev"
}

// parseAuthor splits "Image Factory (https://factory.talos.dev)" as the
// 1.14 controller does (controllers/runtime/image_factory_schematic.go).
func parseAuthor(author string) (flavor, apiURL string) {
	i := strings.LastIndex(author, " (")
	if i < 0 {
		return author, ""
	}
	return author[:i], strings.TrimSuffix(author[i+2:], ")")
}

// Admin-only calls. An insecure client holds no role: Talos >= 1.13's
// authorizer answers PermissionDenied "not authorized"
// (pkg/grpc/middleware/authz/authorizer.go); <= 1.12 maintenance mode does
// not serve them.
func (s *Server) adminOnly() error {
	if s.opts.Legacy {
		return status.Error(codes.Unimplemented, "API is not implemented in maintenance mode")
	}
	return status.Error(codes.PermissionDenied, "not authorized")
}

// Upgrade is admin-only.
func (s *Server) Upgrade(context.Context, *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	return nil, s.adminOnly()
}

// Bootstrap is admin-only.
func (s *Server) Bootstrap(context.Context, *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	return nil, s.adminOnly()
}

// Reset is admin-only.
func (s *Server) Reset(context.Context, *machine.ResetRequest) (*machine.ResetResponse, error) {
	return nil, s.adminOnly()
}

// Reboot is admin-only.
func (s *Server) Reboot(context.Context, *machine.RebootRequest) (*machine.RebootResponse, error) {
	return nil, s.adminOnly()
}

// maintenanceLifecycle is LifecycleService (Talos >= 1.13) for an insecure
// client: every call admin-only.
type maintenanceLifecycle struct {
	machine.UnimplementedLifecycleServiceServer
	s *Server
}

func (l maintenanceLifecycle) Install(*machine.LifecycleServiceInstallRequest, grpc.ServerStreamingServer[machine.LifecycleServiceInstallResponse]) error {
	return l.s.adminOnly()
}

func (l maintenanceLifecycle) Upgrade(*machine.LifecycleServiceUpgradeRequest, grpc.ServerStreamingServer[machine.LifecycleServiceUpgradeResponse]) error {
	return l.s.adminOnly()
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

// TalosVersion is the version the node reports.
func (s *Server) TalosVersion() string { return s.opts.TalosVersion }
