package nodetest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	cosiv1alpha1 "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	sidx509 "github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/talosflash/talosflash/node/nodetest/kubetest"
)

// PKI is a throw-away Talos cluster PKI made in the test the way
// `talosctl gen config` makes it (machinery's secrets.NewTalosCA and
// NewAdminCertificateAndKey: an Ed25519 OS CA, client certificates whose
// Organization carries the Talos role, e.g. "os:admin"), plus a server
// certificate for the node signed by that CA.
type PKI struct {
	ca     *sidx509.PEMEncodedCertificateAndKey
	caCert *x509.Certificate
	caKey  crypto.Signer
	CAPEM  []byte
}

// NewPKI makes a fresh OS CA.
func NewPKI() (*PKI, error) {
	ca, err := secrets.NewTalosCA(time.Now().Add(-time.Minute))
	if err != nil {
		return nil, err
	}
	return PKIFromCA(ca.CrtPEM, ca.KeyPEM)
}

// PKIFromCA is the PKI of an existing OS CA (PEM certificate and key, as a
// machine config's machine.ca holds them once base64-decoded). Errors never
// quote the key.
func PKIFromCA(crtPEM, keyPEM []byte) (*PKI, error) {
	pair, err := tls.X509KeyPair(crtPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate and key do not form a pair")
	}
	caCert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key of type %T cannot sign", pair.PrivateKey)
	}
	return &PKI{ca: &sidx509.PEMEncodedCertificateAndKey{Crt: crtPEM, Key: keyPEM}, caCert: caCert, caKey: signer, CAPEM: crtPEM}, nil
}

// ClientCert issues a client certificate with the given Talos role
// ("os:admin", "os:reader", ...), as talosctl gen config does for admin.
func (p *PKI) ClientCert(r string) (certPEM, keyPEM []byte, err error) {
	c, err := secrets.NewAdminCertificateAndKey(time.Now().Add(-time.Minute), p.ca, role.MakeSet(role.Role(r)), time.Hour)
	if err != nil {
		return nil, nil, err
	}
	return c.Crt, c.Key, nil
}

// Talosconfig renders a talosconfig (machinery's client config format, as
// generate.Input.Talosconfig writes it) with one context holding the CA
// and a fresh client certificate of role.
func (p *PKI) Talosconfig(contextName, role string, endpoints ...string) ([]byte, error) {
	crt, key, err := p.ClientCert(role)
	if err != nil {
		return nil, err
	}
	cfg := clientconfig.NewConfig(contextName, endpoints, p.CAPEM, &sidx509.PEMEncodedCertificateAndKey{Crt: crt, Key: key})
	return cfg.Bytes()
}

func (p *PKI) serverCert(host string) (tls.Certificate, error) {
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
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// NodeOptions shape a configured fake node (apid with client-certificate
// authentication, as after `apply-config`).
type NodeOptions struct {
	Addr string // default "127.0.0.1:0"; the port is kept across reboots
	PKI  *PKI   // required: signs the server certificate, verifies clients

	TalosVersion string // default v1.14.5; below v1.13 the LifecycleService is absent (legacy upgrade)
	// Schematic is the booted image's schematic (served as ExtensionStatuses).
	Schematic *schematic.Schematic
	// Worker makes the machine type worker (no etcd; Bootstrap refused).
	Worker bool
	// Bootstrapped: etcd already has data (a second Bootstrap is refused).
	Bootstrapped bool
	// NotReady is how many Bootstrap calls answer FailedPrecondition
	// "bootstrap is not available yet" first (CRI still starting).
	NotReady int
	// RecoverNotReady is how many EtcdRecover calls answer
	// FailedPrecondition "etcd service is not ready for recovery yet" first
	// (/var not mounted yet).
	RecoverNotReady int
	// UpgradedBootFails, when set, is the cause every boot of a new
	// installation fails with (FailUpgradedBoot): Talos then boots the
	// previous one again (revert.go).
	UpgradedBootFails string
	// LostAnswer: the first Bootstrap call bootstraps but its answer is lost
	// (the client sees Unavailable, as when the link drops).
	LostAnswer bool
	// UnhealthyPolls is how many ServiceList calls after each boot report
	// kubelet (and etcd) as not yet healthy.
	UnhealthyPolls int
	// RebootDowntime is how long the API is down during a reboot (default 100ms).
	RebootDowntime time.Duration
	// UpgradeExitCode is the installer's exit code (0 = success).
	UpgradeExitCode int32
	// MissingImages are image references the node's registry pull fails for.
	MissingImages []string
	// LosePulls: what ImageService.Pull pulls is gone when
	// LifecycleService.Upgrade looks for it (containerd's garbage
	// collection, or another namespace): the upgrade fails before any
	// installer runs.
	LosePulls bool
	// Hostname and MAC the node reports; default "talos-cp-1" and
	// "dc:a6:32:00:00:02".
	Hostname string
	MAC      string
	Logf     func(format string, args ...any)

	// The node's life after its config (lifecycle.go, sequence.go). Stage
	// "" or "booting": the stage follows the boot sequence, booting until
	// every service StartAllServices waits for is up (the extension
	// services; on a node living its Cluster every service, etcd included),
	// then running; any other stage is served as it is. Ready when Unmet
	// is empty (a node living its Cluster: from its state).
	// WaitingExtensions are extension services ("newt") waiting for their
	// ExtensionServiceConfig: the boot cannot finish until the document
	// arrives (an apply: the service starts in place), and fails when
	// BootTimeout (default constants.BootTimeout, 70 min) passes since
	// boot, on Clock when set (a test moves it), else on the wall clock:
	// the node reboots (new boot ID).
	Stage             string
	Unmet             []runtime.UnmetCondition
	WaitingExtensions []string
	// RunningExtensions are extension services with their config: Running.
	RunningExtensions []string
	BootTimeout       time.Duration
	Clock             *Clock

	// Config is the machine config the node runs (served as its COSI
	// MachineConfig to os:admin, replaced by ApplyConfiguration); when
	// set, its ExtensionServiceConfig documents decide which extension
	// services of Schematic wait and which run (WaitingExtensions and
	// RunningExtensions are then ignored).
	Config []byte

	// Cluster, when set, is the Kubernetes side of the node's config
	// (cluster.go): the node lives it. Its stage and MachineStatus follow
	// its state (a control plane boots until its bootstrap, nodeReady
	// waits for its Kubernetes node), a control plane serves Kubeconfig
	// and starts a fake Kubernetes API (kubetest) at its bootstrap, and the
	// node's kubelet registers in it. Stage and Unmet, when set, still win.
	Cluster *ClusterConfig
	// CNI: the user installs a CNI (Cilium, say) as soon as the cluster's
	// API runs, so its nodes turn Ready as they register (a control
	// plane's; kubetest.Server.InstallCNI does it later).
	CNI bool
	// CoreDNS: the cluster's API runs Talos' CoreDNS Deployment, scheduled
	// once a CNI runs (kubetest.Options.CoreDNS): pods for drains to evict.
	CoreDNS bool
}

// Node is a running configured fake node.
type Node struct {
	machine.UnimplementedMachineServiceServer

	opts NodeOptions
	addr string
	cert tls.Certificate

	mu           sync.Mutex
	grpc         *grpc.Server
	done         chan struct{}
	closed       bool
	version      string
	schematic    *schematic.Schematic
	schematicID  string // when the schematic YAML is unknown (booted another installer)
	bootID       int
	bootstrapped bool
	notReady     int
	polls        int
	bootstraps   int
	pulled       []string
	stores       map[string]bool // "<containerd>/<namespace> <ref>" of every image pulled
	upgrades     []string        // images given to Upgrade (either API)
	staged       string          // installer image to boot at the next reboot
	reboots      int
	rebootCalls  int // Reboot requests received (the reboot itself follows)
	legacyCalls  int

	bootStart    time.Time   // wall clock at the current boot (without a Clock)
	bootTimer    *time.Timer // the BootTimeout reboot of this boot (without a Clock)
	timingOut    bool        // this boot's BootTimeout reboot is under way
	timeoutFire  func()      // this boot's BootTimeout reboot (with a Clock)
	clockOnce    sync.Once
	serviceCalls int

	// The running config (configured.go).
	config, stagedConfig []byte
	applies              []Request
	configReads          int
	applying             sync.Mutex  // one ApplyConfiguration at a time
	lifecycle            sync.Mutex  // one LifecycleService install or upgrade at a time
	st                   state.State // this boot's COSI state
	waitingExt           []string    // extension services waiting for their config
	runningExt           []string    // extension services running with it
	hostname             string      // what HostnameStatus says: opts.Hostname below a config's static one (hostname.go)
	boot                 *bootRun    // this boot's sequence, services, events and logs (sequence.go)
	syncMu               sync.Mutex  // one sync at a time
	upgradeExit          *int32      // SetUpgradeExitCode: overrides UpgradeExitCode

	// etcd (etcd.go): its data once bootstrapped, the etcd service's
	// failure (a recovery that could not restore), the last EtcdRecover
	// upload (/var/lib/etcd.snapshot).
	etcd            *etcdStore
	etcdFailure     string
	recoverUpload   []byte
	recoverNotReady int
	recoverCalls    int
	recoveries      []EtcdRecovery
	snapshots       int
	snapshotStall   int
	// The installations and the upgrade fallback (revert.go).
	label    string     // the boot entry the node runs (grub's A or B)
	fallback *bootEntry // META tag Upgrade: the installation before the last upgrade, until a boot of the new one is running and ready
	failBoot string     // FailUpgradedBoot: the cause a boot of a new installation fails with
	reverts  int

	kube        *kubetest.Server // the control plane's Kubernetes API, after bootstrap
	kubeconfigs int
	stop        chan struct{} // closed by Close
	rebooted    chan struct{} // closed and replaced at each new boot
}

// StartNode runs a configured fake node until the test ends.
func StartNode(t testing.TB, opts NodeOptions) *Node {
	t.Helper()
	n, err := NewNode(opts)
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// NewNode starts a configured fake node; Close stops it.
func NewNode(opts NodeOptions) (*Node, error) { return newNode(opts, "") }

// newNode is NewNode for a node that booted an image known only by its
// schematic ID (a card's record: no YAML for it).
func newNode(opts NodeOptions, schematicID string) (*Node, error) {
	if opts.PKI == nil {
		return nil, fmt.Errorf("NodeOptions.PKI is required")
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.TalosVersion == "" {
		opts.TalosVersion = DefaultVersion
	}
	if opts.RebootDowntime == 0 {
		opts.RebootDowntime = 100 * time.Millisecond
	}
	if opts.Hostname == "" {
		opts.Hostname = "talos-cp-1"
	}
	if opts.MAC == "" {
		opts.MAC = "dc:a6:32:00:00:02"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	lis, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", opts.Addr, err)
	}
	host, _, _ := net.SplitHostPort(lis.Addr().String())
	cert, err := opts.PKI.serverCert(host)
	if err != nil {
		lis.Close()
		return nil, err
	}
	n := &Node{opts: opts, addr: lis.Addr().String(), cert: cert, version: opts.TalosVersion,
		schematic: opts.Schematic, schematicID: schematicID, bootstrapped: opts.Bootstrapped, notReady: opts.NotReady, bootID: 1,
		recoverNotReady: opts.RecoverNotReady, failBoot: opts.UpgradedBootFails, label: "A",
		bootStart: time.Now(), stop: make(chan struct{}), rebooted: make(chan struct{}),
		config: slices.Clone(opts.Config), waitingExt: opts.WaitingExtensions, runningExt: opts.RunningExtensions}
	n.configureExtensionsLocked()
	n.applyHostnameLocked()
	if opts.Bootstrapped {
		n.seedEtcdLocked()
	}
	n.boot = newBootRun()
	n.beginBootLocked(n.boot, 0)
	if _, err := n.stage(); err != nil {
		lis.Close()
		return nil, err
	}
	if err := n.serve(lis); err != nil {
		lis.Close()
		return nil, err
	}
	n.armBootTimeout()
	n.startKubelet()
	go n.watchCluster()
	if opts.Bootstrapped && n.living() {
		n.startKubeAPI()
	}
	return n, nil
}

// legacy: no LifecycleService, which Talos serves from v1.13.0-alpha.3
// (talosctl v1.14's cmd/talosctl/cmd/talos/upgrade.go
// talosUpgradeAPIVersionRange ">1.13.0-alpha.2").
func (n *Node) legacy() bool {
	v, err := semver.ParseTolerant(n.version)
	return err != nil || !v.GT(semver.MustParse("1.13.0-alpha.2"))
}

// serve starts a gRPC server for the current boot on lis. Caller holds no lock.
func (n *Node) serve(lis net.Listener) error {
	pool := x509.NewCertPool()
	pool.AddCert(n.opts.PKI.caCert)
	tlsCfg := &tls.Config{
		Certificates: []tls.Certificate{n.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}
	st, err := n.buildState()
	if err != nil {
		return err
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.UnaryInterceptor(n.authUnary), grpc.StreamInterceptor(n.authStream))
	machine.RegisterMachineServiceServer(g, n)
	machine.RegisterImageServiceServer(g, imageService{n: n})
	if !n.legacy() {
		machine.RegisterLifecycleServiceServer(g, lifecycleService{n: n})
	}
	cosiv1alpha1.RegisterStateServer(g, cosiserver.NewState(state.WrapCore(state.Filter(st, n.cosiAccess(st)))))
	done := make(chan struct{})
	n.mu.Lock()
	n.grpc, n.done, n.st = g, done, st
	n.mu.Unlock()
	n.sync() // the boot's services, MachineStatus and its event
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	return nil
}

func (n *Node) buildState() (state.State, error) {
	n.mu.Lock()
	s := &Server{opts: Options{TalosVersion: n.version, Hostname: n.hostname, MAC: n.opts.MAC, Schematic: n.schematic}}
	id := n.schematicID
	cfg := slices.Clone(n.config)
	nodename, hasNodename := n.nodenameLocked()
	n.mu.Unlock()
	st, err := s.buildState()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if cfg != nil {
		if err := putMachineConfig(ctx, st, cfg); err != nil {
			return nil, err
		}
	}
	if err := putNodename(ctx, st, nodename, hasNodename); err != nil {
		return nil, err
	}
	if s.opts.Schematic == nil && id != "" {
		// Booted an installer whose schematic the fake has no YAML for: only its ID.
		es := runtime.NewExtensionStatus(runtime.NamespaceName, "0")
		es.TypedSpec().Metadata.Name = "schematic"
		es.TypedSpec().Metadata.Version = id
		if err := st.Create(ctx, es); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Roles a client certificate carries (its Organization), as Talos names them.
const (
	roleAdmin    = "os:admin"
	roleOperator = "os:operator"
	roleReader   = "os:reader"
	// roleEtcdBackup may take etcd snapshots only (pkg/machinery/role/role.go EtcdBackup).
	roleEtcdBackup = "os:etcd:backup"
)

// methodRoles are the roles allowed each method the fake serves
// (internal/app/machined/pkg/system/services/machined.go rules); a method
// not listed is os:admin only (FallbackRoles).
var methodRoles = map[string][]string{
	// os:admin outside maintenance: v1alpha1_server.go ApplyConfiguration
	// refuses any other role itself (the rule lists os:reader for maintenance).
	"/machine.MachineService/ApplyConfiguration": {roleAdmin},
	"/machine.MachineService/Bootstrap":          {roleAdmin},
	"/machine.MachineService/Dmesg":              {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/EtcdMemberList":     {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/EtcdRecover":        {roleAdmin},
	"/machine.MachineService/EtcdSnapshot":       {roleAdmin, roleOperator, roleEtcdBackup},
	"/machine.MachineService/Events":             {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/Hostname":           {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/Kubeconfig":         {roleAdmin},
	"/machine.MachineService/Logs":               {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/LogsContainers":     {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/Read":               {roleAdmin},
	"/machine.MachineService/Reboot":             {roleAdmin, roleOperator},
	"/machine.MachineService/ServiceList":        {roleAdmin, roleOperator, roleReader},
	"/machine.MachineService/Upgrade":            {roleAdmin},
	"/machine.MachineService/Version":            {roleAdmin, roleOperator, roleReader},
	"/machine.ImageService/Pull":                 {roleAdmin, roleOperator},
	"/machine.LifecycleService/Install":          {roleAdmin},
	"/machine.LifecycleService/Upgrade":          {roleAdmin},
	"/cosi.resource.State/Get":                   {roleAdmin, roleOperator, roleReader},
	"/cosi.resource.State/List":                  {roleAdmin, roleOperator, roleReader},
	"/cosi.resource.State/Watch":                 {roleAdmin, roleOperator, roleReader},
}

// clientRoles are the roles of the peer's client certificate.
func clientRoles(ctx context.Context) []string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0].Subject.Organization
}

// authorize is the apid authorizer (pkg/grpc/middleware/authz): the
// client needs one of the method's roles.
func authorize(ctx context.Context, method string) error {
	allowed, ok := methodRoles[method]
	if !ok {
		allowed = []string{roleAdmin}
	}
	for _, r := range clientRoles(ctx) {
		if slices.Contains(allowed, r) {
			return nil
		}
	}
	return errNotAuthorized
}

func (n *Node) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (n *Node) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// Addr is host:port of the node.
func (n *Node) Addr() string { return n.addr }

// Close stops the node.
func (n *Node) Close() {
	n.mu.Lock()
	first := !n.closed
	n.closed = true
	g, done := n.grpc, n.done
	if n.bootTimer != nil {
		n.bootTimer.Stop()
	}
	n.mu.Unlock()
	if first {
		close(n.stop)
	}
	n.stopKubeAPI()
	g.Stop()
	<-done
}

// Version answers like apid: the running Talos tag.
func (n *Node) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return versionReply(n.version, arch, true), nil
}

// Bootstrap is v1alpha1_server.go's: FailedPrecondition while not
// allowed yet, Unimplemented on a worker, AlreadyExists once etcd has
// data; with RecoverEtcd, etcd starts from the uploaded snapshot
// (etcd.go), and a snapshot it cannot restore fails the etcd service,
// not the answer.
func (n *Node) Bootstrap(ctx context.Context, in *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	resp, err := n.bootstrap(in)
	if n.Bootstrapped() {
		n.sync()         // etcd runs: the boot sequence may complete
		n.startKubeAPI() // etcd up: the control plane's static pods follow
	} else if err == nil {
		n.sync() // etcd failed to start from the snapshot
	}
	return resp, err
}

func (n *Node) bootstrap(in *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.bootstraps++
	n.opts.Logf("Bootstrap (call %d, recover %v)", n.bootstraps, in.GetRecoverEtcd())
	if n.opts.LostAnswer && n.bootstraps == 1 {
		n.bootstrapped = true
		n.seedEtcdLocked()
		return nil, status.Error(codes.Unavailable, "error reading from server: connection reset by peer")
	}
	switch {
	case n.notReady > 0:
		n.notReady--
		return nil, status.Error(codes.FailedPrecondition, "bootstrap is not available yet")
	case n.opts.Worker:
		return nil, status.Error(codes.Unimplemented, "bootstrap is only available on control plane nodes")
	case n.bootstrapped:
		return nil, status.Error(codes.AlreadyExists, "etcd data directory is not empty")
	}
	if in.GetRecoverEtcd() {
		n.recoverLocked(in.GetRecoverSkipHashCheck())
	} else {
		n.bootstrapped, n.etcdFailure = true, ""
		n.seedEtcdLocked()
	}
	return &machine.BootstrapResponse{Messages: []*machine.Bootstrap{{}}}, nil
}

// ServiceList lists the services of this boot with their state, health
// and events (service_runner.go AsProto; sequence.go). Each call counts as
// a poll for NodeOptions.UnhealthyPolls.
func (n *Node) ServiceList(context.Context, *emptypb.Empty) (*machine.ServiceListResponse, error) {
	n.mu.Lock()
	n.serviceCalls++
	n.polls++
	n.mu.Unlock()
	n.sync()
	n.mu.Lock()
	defer n.mu.Unlock()
	return &machine.ServiceListResponse{Messages: []*machine.ServiceList{{Services: n.serviceInfosLocked()}}}, nil
}

// Read serves /proc/sys/kernel/random/boot_id (what talosctl reads to see
// a reboot) and /proc/uptime (seconds since boot, on the node's Clock).
func (n *Node) Read(in *machine.ReadRequest, srv grpc.ServerStreamingServer[common.Data]) error {
	var data string
	switch in.GetPath() {
	case "/proc/sys/kernel/random/boot_id":
		n.mu.Lock()
		data = bootIDString(n.bootID) + "\n"
		n.mu.Unlock()
	case "/proc/uptime":
		up := n.sinceBoot().Seconds()
		data = fmt.Sprintf("%.2f %.2f\n", up, up*3.5)
	default:
		return status.Errorf(codes.NotFound, "open %s: no such file or directory", in.GetPath())
	}
	return srv.Send(&common.Data{Bytes: []byte(data)})
}

// Upgrade is the legacy MachineService.Upgrade (Talos <= 1.12 path, and the
// deprecated one on 1.13+): acknowledges, then reboots into the image.
func (n *Node) Upgrade(_ context.Context, in *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	n.mu.Lock()
	n.upgrades = append(n.upgrades, in.GetImage())
	n.legacyCalls++
	fail := n.exitCodeLocked() != 0
	n.mu.Unlock()
	if in.GetImage() == "" {
		return nil, status.Error(codes.InvalidArgument, "image is required")
	}
	if fail {
		return nil, status.Error(codes.Internal, "upgrade failed: installer exited with a non-zero code")
	}
	actor := newActorID()
	n.mu.Lock()
	n.stageInstallLocked(in.GetImage())
	n.mu.Unlock()
	go n.reboot(actor, "upgrade")
	return &machine.UpgradeResponse{Messages: []*machine.Upgrade{{Ack: "Upgrade request received", ActorId: actor}}}, nil
}

// Reboot is v1alpha1_server.go's: a new actor ID, the reboot sequence run
// in the background (its events carry the actor ID), the API away for
// RebootDowntime, then a new boot (new boot ID) of the staged installer's
// version.
func (n *Node) Reboot(context.Context, *machine.RebootRequest) (*machine.RebootResponse, error) {
	actor := newActorID()
	n.mu.Lock()
	n.rebootCalls++
	if n.boot != nil {
		n.boot.logLocked(n.sinceBootLocked(), "reboot via API received. actor id: %s", actor)
	}
	n.mu.Unlock()
	go n.reboot(actor, "reboot")
	return &machine.RebootResponse{Messages: []*machine.Reboot{{ActorId: actor}}}, nil
}

// reboot ends the current boot: seq ("reboot", "upgrade"; "" when the boot
// failed) runs its stop phases, publishing with actor, then the API stops
// and a new boot begins.
func (n *Node) reboot(actor, seq string) {
	time.Sleep(10 * time.Millisecond) // let the reply leave first
	if seq != "" && n.stopSequence(actor, seq) {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.reboots++
	g, done := n.grpc, n.done
	n.nextEntryLocked() // the staged installation, or the previous one after a failed boot (revert.go)
	if n.stagedConfig != nil {
		n.config, n.stagedConfig = n.stagedConfig, nil
		n.applyHostnameLocked()
	}
	n.configureExtensionsLocked()
	if n.boot != nil {
		n.boot.journal.end()
	}
	n.mu.Unlock()
	// The streams that follow the boot (Events, Logs, Dmesg) end with its
	// journal, having sent the last events; others (a COSI watch) are cut.
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		g.Stop()
	}
	<-done
	// The new boot (its boot ID) begins once the old API is gone: no read
	// sees the new boot ID from the old boot.
	n.mu.Lock()
	n.bootID++
	n.polls = 0
	n.newBootLocked()
	close(n.rebooted)
	n.rebooted = make(chan struct{})
	n.mu.Unlock()
	time.Sleep(n.opts.RebootDowntime)
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return
	}
	lis, err := net.Listen("tcp", n.addr)
	if err != nil {
		n.opts.Logf("reboot: listen %s: %v", n.addr, err)
		return
	}
	if err := n.serve(lis); err != nil {
		n.opts.Logf("reboot: %v", err)
		lis.Close()
		return
	}
	n.armBootTimeout()
	n.armBootFailure()
}

// RebootRequests counts MachineService.Reboot calls received.
func (n *Node) RebootRequests() int { n.mu.Lock(); defer n.mu.Unlock(); return n.rebootCalls }

// Bootstraps counts Bootstrap calls.
func (n *Node) Bootstraps() int { n.mu.Lock(); defer n.mu.Unlock(); return n.bootstraps }

// Bootstrapped reports whether etcd was bootstrapped.
func (n *Node) Bootstrapped() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.bootstrapped }

// Pulled lists the images pulled through ImageService.Pull.
func (n *Node) Pulled() []string { n.mu.Lock(); defer n.mu.Unlock(); return slices.Clone(n.pulled) }

// Upgrades lists the installer images given to Upgrade (either API), in order.
func (n *Node) Upgrades() []string { n.mu.Lock(); defer n.mu.Unlock(); return slices.Clone(n.upgrades) }

// LegacyUpgrades counts MachineService.Upgrade calls.
func (n *Node) LegacyUpgrades() int { n.mu.Lock(); defer n.mu.Unlock(); return n.legacyCalls }

// WaitReboots waits until the node has rebooted count times (its new boot
// ID set) or ctx ends.
func (n *Node) WaitReboots(ctx context.Context, count int) error {
	for {
		n.mu.Lock()
		done, ch := n.reboots >= count && n.bootID > count, n.rebooted
		n.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Reboots counts reboots.
func (n *Node) Reboots() int { n.mu.Lock(); defer n.mu.Unlock(); return n.reboots }

// RunningVersion is the Talos version the node runs now.
func (n *Node) RunningVersion() string { n.mu.Lock(); defer n.mu.Unlock(); return n.version }

type imageService struct {
	machine.UnimplementedImageServiceServer
	n *Node
}

// Pull "pulls" the image into the containerd instance the request names
// (internal/app/images/images.go Pull, ctrhelper ContainerdInstanceHelper:
// the CONTAINERD or CRI driver, the system or k8s.io namespace); the
// registry is not contacted. The answer's name is the reference pinned to
// the image's digest when it was not canonical.
func (s imageService) Pull(in *machine.ImageServicePullRequest, srv grpc.ServerStreamingServer[machine.ImageServicePullResponse]) error {
	ref := in.GetImageRef()
	store, err := containerdStore(in.GetContainerd())
	if err != nil {
		return err
	}
	if slices.Contains(s.n.opts.MissingImages, ref) {
		return status.Errorf(codes.NotFound, "error pulling image: failed to resolve reference %q: %s: not found", ref, ref)
	}
	s.n.mu.Lock()
	s.n.pulled = append(s.n.pulled, ref)
	if s.n.stores == nil {
		s.n.stores = map[string]bool{}
	}
	s.n.stores[store+" "+ref] = !s.n.opts.LosePulls
	s.n.mu.Unlock()
	digest := sha256.Sum256([]byte(ref))
	if err := srv.Send(&machine.ImageServicePullResponse{Response: &machine.ImageServicePullResponse_PullProgress{
		PullProgress: &machine.ImageServicePullProgress{LayerId: fmt.Sprintf("sha256:%x", digest[:6])}}}); err != nil {
		return err
	}
	name := ref
	if !strings.Contains(ref, "@") {
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			name = ref[:i]
		}
		name += fmt.Sprintf("@sha256:%x", digest)
	}
	return srv.Send(&machine.ImageServicePullResponse{Response: &machine.ImageServicePullResponse_Name{Name: name}})
}

// containerdStore names the containerd instance and namespace a request
// addresses, or the node's error for a request that names none
// (ctrhelper.go ContainerdInstanceHelper).
func containerdStore(c *common.ContainerdInstance) (string, error) {
	var addr, ns string
	switch c.GetDriver() {
	case common.ContainerDriver_CONTAINERD:
		addr = "system"
	case common.ContainerDriver_CRI:
		addr = "cri"
	default:
		return "", status.Errorf(codes.InvalidArgument, "invalid containerd driver %s", c.GetDriver())
	}
	switch c.GetNamespace() {
	case common.ContainerdNamespace_NS_CRI:
		ns = "k8s.io"
	case common.ContainerdNamespace_NS_SYSTEM:
		ns = "system"
	default:
		return "", status.Errorf(codes.InvalidArgument, "invalid containerd namespace %s", c.GetNamespace())
	}
	if c.GetDriver() == common.ContainerDriver_CONTAINERD && c.GetNamespace() == common.ContainerdNamespace_NS_CRI {
		return "", status.Errorf(codes.InvalidArgument, "cannot use CRI namespace with containerd driver")
	}
	return addr + "/" + ns, nil
}

type lifecycleService struct {
	machine.UnimplementedLifecycleServiceServer
	n *Node
}

// Upgrade is LifecycleService.Upgrade (Talos >= 1.13,
// internal/app/lifecycle/lifecycle.go): one at a time, runs the installer
// from an image already pulled into containerd, streams its progress and
// exit code (a failing installer is an exit code, not an error), and does
// not reboot (talosctl reboots afterwards). An image that was not pulled
// fails before anything is streamed: Internal "upgrade failed: installer
// image %q not found in containerd store: ..." (lifecycle/container.go,
// containerd's GetImage error).
func (s lifecycleService) Upgrade(in *machine.LifecycleServiceUpgradeRequest, srv grpc.ServerStreamingServer[machine.LifecycleServiceUpgradeResponse]) error {
	ref := in.GetSource().GetImageName()
	n := s.n
	if ref == "" {
		return status.Error(codes.InvalidArgument, "installer image name is required")
	}
	if !n.lifecycle.TryLock() {
		return status.Error(codes.FailedPrecondition, "another installation/upgrade is already in progress")
	}
	defer n.lifecycle.Unlock()
	store, storeErr := containerdStore(in.GetContainerd())
	n.mu.Lock()
	n.upgrades = append(n.upgrades, ref)
	pulled := n.stores[store+" "+ref]
	code := n.exitCodeLocked()
	n.mu.Unlock()
	if storeErr != nil {
		return status.Error(codes.Internal, fmt.Sprintf("upgrade failed: %v", storeErr))
	}
	msg := func(m string) *machine.LifecycleServiceUpgradeResponse {
		return &machine.LifecycleServiceUpgradeResponse{Progress: &machine.LifecycleServiceInstallProgress{
			Response: &machine.LifecycleServiceInstallProgress_Message{Message: m}}}
	}
	exit := func(c int32) *machine.LifecycleServiceUpgradeResponse {
		return &machine.LifecycleServiceUpgradeResponse{Progress: &machine.LifecycleServiceInstallProgress{
			Response: &machine.LifecycleServiceInstallProgress_ExitCode{ExitCode: c}}}
	}
	if !pulled {
		return status.Error(codes.Internal, fmt.Sprintf("upgrade failed: installer image %q not found in containerd store: image %q: not found", ref, ref))
	}
	for _, m := range []string{"running installer " + ref, "installing bootloader"} {
		if err := srv.Send(msg(m)); err != nil {
			return err
		}
	}
	if code == 0 {
		n.mu.Lock()
		n.stageInstallLocked(ref)
		n.mu.Unlock()
	}
	return srv.Send(exit(code))
}

// SetUpgradeExitCode makes the installer of the node's next upgrades exit
// with code (0: succeed): a failure injected into a running node.
func (n *Node) SetUpgradeExitCode(code int32) { n.mu.Lock(); n.upgradeExit = &code; n.mu.Unlock() }

func (n *Node) exitCodeLocked() int32 {
	if n.upgradeExit != nil {
		return *n.upgradeExit
	}
	return n.opts.UpgradeExitCode
}
