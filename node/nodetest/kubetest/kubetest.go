// Package kubetest is a small Kubernetes API server on loopback for tests:
// the kube-apiserver a fake Talos control plane (node/nodetest) starts after
// its bootstrap. It serves what talosflash reads through client-go (kube's
// REST client; tests may use the typed clientset), as JSON of the
// k8s.io/api types:
//
//   - GET /api/v1/nodes (list; fieldSelector metadata.name=NAME), with
//     ?watch=true a stream of watch events from a resourceVersion;
//   - GET /api/v1/nodes/{name};
//   - what a drain needs (workloads.go): cordon (PATCH of a node), pods
//     by node, evictions under PodDisruptionBudgets, DaemonSets.
//
// TLS with a server certificate from the cluster's Kubernetes CA (the
// config's KubeAPIServerCAConfig issuingCA, or v1alpha1 cluster.ca); clients
// authenticate with a certificate from that CA (the admin kubeconfig's:
// Organization system:masters). Nodes are what kubelets register
// (RegisterNode): Ready False with the kubelet's "no CNI" message until a
// CNI runs (InstallCNI, or Options.CNIInstalled for a config whose Flannel
// Talos deploys).
//
// Every change goes through Server.update, which bumps the resourceVersion
// and tells watchers: a write route is an entry of routes plus a handler
// that calls update (cordon, workloads.go). Each modelled behaviour is in
// Behaviours, with its source.
package kubetest

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
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's and containerd's words for a node whose CNI is not there
// yet (see Behaviours for their sources).
const (
	ReasonNotReady  = "KubeletNotReady"
	ReasonReady     = "KubeletReady"
	MessageReady    = "kubelet is posting ready status"
	MessageNoCNI    = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	AdminGroup      = "system:masters"
	controlPlaneKey = "node-role.kubernetes.io/control-plane"
)

// Behaviour is one modelled behaviour with its upstream source.
type Behaviour struct{ Name, Source string }

// Behaviours is the table of what this fake models.
var Behaviours = []Behaviour{
	{"a kubelet registers its Node with the hostname as name, InternalIP and Hostname addresses, kubernetes.io/* labels and node-role.kubernetes.io/control-plane on control planes",
		"kubernetes pkg/kubelet/kubelet_node_status.go (initialNode), siderolabs/talos internal/app/machined/pkg/controllers/k8s/nodename.go, nodelabels"},
	{"Ready False, reason KubeletNotReady, message \"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized\" until a CNI runs",
		"kubernetes pkg/kubelet/kubelet.go (updateRuntimeUp), pkg/kubelet/container/runtime.go (RuntimeCondition.String), pkg/kubelet/nodestatus/setters.go (ReadyCondition), containerd internal/cri/server/status.go, containerd/go-cni errors.go (ErrCNINotInitialized)"},
	{"Ready True, reason KubeletReady, \"kubelet is posting ready status\" once the CNI runs; lastTransitionTime changes only with the status",
		"kubernetes pkg/kubelet/nodestatus/setters.go (ReadyCondition)"},
	{"the node lifecycle controller taints a NotReady node node.kubernetes.io/not-ready:NoSchedule and removes the taint once Ready",
		"kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go (doNoScheduleTaintingPass)"},
	{"Talos deploys Flannel at bootstrap when the control plane's config asks for it (KubeFlannelCNIConfig, or v1alpha1 cluster.network.cni flannel): nodes become Ready without a CNI installed by the user",
		"siderolabs/talos internal/app/machined/pkg/controllers/k8s/control_plane.go (FlannelEnabled), pkg/machinery/config/container/container.go (K8sFlannelCNIConfig)"},
	{"list and get answer JSON (the typed client accepts application/json after protobuf), with apiVersion v1 and kind; a missing node is a Status 404 NotFound",
		"k8s.io/client-go rest/request.go (UseProtobufAsDefault), k8s.io/apimachinery pkg/api/errors"},
	{"watch streams {type, object} events (ADDED for what exists when no resourceVersion is given, then MODIFIED/DELETED) after resourceVersion; an expired one is 410 Gone; timeoutSeconds ends the stream",
		"k8s.io/apimachinery pkg/apis/meta/v1/watch.go (WatchEvent), k8s.io/client-go rest/request.go (newStreamWatcher)"},
	{"client certificate authentication against the cluster CA; a certificate without group system:masters is refused 403 (RBAC of a fresh cluster), none 401",
		"kubernetes staging/src/k8s.io/apiserver/pkg/authentication/request/x509, plugin/pkg/auth/authorizer/rbac/bootstrappolicy (cluster-admin for system:masters)"},
}

// Options shape the API server.
type Options struct {
	// Addr is the listen address (default "127.0.0.1:0"); only 127.0.0.0/8.
	Addr string
	// CACert and CAKey are the cluster's Kubernetes CA (PEM).
	CACert, CAKey []byte
	// Hosts are extra subject alternative names of the server certificate
	// (the cluster endpoint's host, the node's IP), as Talos adds them.
	Hosts []string
	// CNIInstalled: a CNI runs from the start (Talos deployed Flannel).
	CNIInstalled bool
	// CoreDNS runs CoreDNS as Talos deploys it at the bootstrap (Deployment
	// kube-system/coredns, 2 replicas; controllers/k8s/manifest.go with the
	// KubeCoreDNSConfig default): its pods are scheduled once a CNI runs on
	// a registered node, so a drain has pods to evict, as on a fresh cluster.
	CoreDNS bool
	// KubeletVersion the nodes report; default v1.37.1.
	KubeletVersion string
	Logf           func(format string, args ...any)
}

// Server is a running fake API.
type Server struct {
	opts Options
	lis  net.Listener
	srv  *http.Server
	done chan struct{}
	pool *x509.CertPool

	mu       sync.Mutex
	rv       uint64
	nodes    map[string]*corev1.Node
	events   []event // the last maxEvents changes, oldest first
	watchers map[chan struct{}]struct{}
	cni      bool
	closed   bool
	changed  chan struct{} // closed and replaced at every change
	requests []string      // "GET /api/v1/nodes" ..., in order
	wl       *workloads    // pods, budgets, DaemonSets (workloads.go)
}

type event struct {
	rv   uint64
	kind string // ADDED, MODIFIED, DELETED
	node corev1.Node
}

const maxEvents = 1000

// New starts the API server; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.KubeletVersion == "" {
		opts.KubeletVersion = "v1.37.1"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("kubetest: address %q: %w", opts.Addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("kubetest: %s is not a loopback address", host)
	}
	ca, caKey, err := parseCA(opts.CACert, opts.CAKey)
	if err != nil {
		return nil, err
	}
	cert, err := issue(ca, caKey, "kube-apiserver", nil, append([]string{host, "kubernetes", "kubernetes.default", "localhost"}, opts.Hosts...), x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("kubetest: listen %s: %w", opts.Addr, err)
	}
	s := &Server{opts: opts, lis: lis, done: make(chan struct{}), pool: x509.NewCertPool(),
		nodes: map[string]*corev1.Node{}, watchers: map[chan struct{}]struct{}{}, cni: opts.CNIInstalled, changed: make(chan struct{})}
	s.pool.AddCert(ca)
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.HandleFunc(r.pattern, s.authorized(r.handle))
	}
	mux.HandleFunc("/", s.authorized(func(s *Server, w http.ResponseWriter, r *http.Request) {
		s.status(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource", "")
	}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: s.pool, MinVersion: tls.VersionTLS12,
	}, ErrorLog: nil}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(lis, "", "")
	}()
	return s, nil
}

// route is one API path (workloads.go adds the drain's).
type route struct {
	pattern string
	handle  func(s *Server, w http.ResponseWriter, r *http.Request)
}

var routes = []route{
	{"GET /api/v1/nodes", (*Server).listOrWatchNodes},
	{"GET /api/v1/nodes/{name}", (*Server).getNode},
}

// URL is https://host:port of the API.
func (s *Server) URL() string { return "https://" + s.lis.Addr().String() }

// Addr is host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops the server and ends every watch.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// Requests lists the API requests received ("GET /api/v1/nodes?watch=true"...).
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// RegisterNode is a kubelet registering its node (idempotent): Ready as
// the CNI allows.
func (s *Server) RegisterNode(name, internalIP string, controlPlane bool) {
	s.update(func() []event {
		if _, ok := s.nodes[name]; ok {
			return nil
		}
		now := metav1.Now()
		n := &corev1.Node{
			TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: newUID(name), CreationTimestamp: now, Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "arm64",
			}},
			Status: corev1.NodeStatus{
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}, {Type: corev1.NodeHostName, Address: name}},
				NodeInfo: corev1.NodeSystemInfo{KubeletVersion: s.opts.KubeletVersion, OSImage: "Talos", OperatingSystem: "linux", Architecture: "arm64",
					ContainerRuntimeVersion: "containerd://2.1.5"},
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available", LastHeartbeatTime: now, LastTransitionTime: now},
					{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastHeartbeatTime: now, LastTransitionTime: now},
					{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available", LastHeartbeatTime: now, LastTransitionTime: now},
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: ReasonNotReady, Message: MessageNoCNI, LastHeartbeatTime: now, LastTransitionTime: now},
				},
			},
		}
		if controlPlane {
			n.Labels[controlPlaneKey] = ""
		}
		setReady(n, s.cni, now)
		s.nodes[name] = n
		s.seedLocked()
		return []event{{kind: "ADDED", node: *n}}
	})
	s.opts.Logf("kube-apiserver: node %s registered", name)
}

// InstallCNI is the user installing a CNI (its pods run on every node):
// every node turns Ready, and nodes registered later are Ready at once.
func (s *Server) InstallCNI() {
	s.update(func() []event {
		s.cni = true
		s.seedLocked()
		var evs []event
		for _, name := range s.nodeNames() {
			n := s.nodes[name]
			if setReady(n, true, metav1.Now()) {
				evs = append(evs, event{kind: "MODIFIED", node: *n})
			}
		}
		return evs
	})
	s.opts.Logf("kube-apiserver: CNI installed")
}

// Changed is closed at the next change of the store (a node registered,
// Ready, cordoned; a pod evicted...): a watcher's signal to read again.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// NodeReady says whether the node is registered and Ready.
func (s *Server) NodeReady(name string) (ready, registered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return false, false
	}
	return readyStatus(n) == corev1.ConditionTrue, true
}

// Nodes returns copies of the nodes, by name.
func (s *Server) Nodes() []corev1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]corev1.Node, 0, len(s.nodes))
	for _, name := range s.nodeNames() {
		out = append(out, *s.nodes[name].DeepCopy())
	}
	return out
}

// WaitNodes waits until n nodes are registered or ctx ends.
func (s *Server) WaitNodes(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		have, ch := len(s.nodes), s.changed
		s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %d of %d nodes registered: %w", have, n, ctx.Err())
		}
	}
}

// UpdateNode changes a node through f and tells watchers (MODIFIED); the
// way write handlers (cordon) change the store.
func (s *Server) UpdateNode(name string, f func(*corev1.Node)) error {
	var err error
	s.update(func() []event {
		n, ok := s.nodes[name]
		if !ok {
			err = fmt.Errorf("kubetest: no node %q", name)
			return nil
		}
		f(n)
		return []event{{kind: "MODIFIED", node: *n}}
	})
	return err
}

// update runs f under the lock; each event it returns gets the next
// resourceVersion (stamped on the stored node too) and wakes watchers.
func (s *Server) update(f func() []event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := f()
	if len(evs) == 0 {
		return
	}
	for _, ev := range evs {
		s.rv++
		ev.rv = s.rv
		rv := strconv.FormatUint(s.rv, 10)
		if n, ok := s.nodes[ev.node.Name]; ok {
			n.ResourceVersion = rv
		}
		ev.node = *ev.node.DeepCopy()
		ev.node.ResourceVersion = rv
		s.events = append(s.events, ev)
	}
	if len(s.events) > maxEvents {
		s.events = slices.Clone(s.events[len(s.events)-maxEvents:])
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) nodeNames() []string {
	names := make([]string, 0, len(s.nodes))
	for n := range s.nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// setReady sets the Ready condition and the not-ready taint for a node
// whose runtime network is ready (cni) or not; true when it changed.
func setReady(n *corev1.Node, cni bool, now metav1.Time) bool {
	want := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: ReasonNotReady, Message: MessageNoCNI}
	if cni {
		want.Status, want.Reason, want.Message = corev1.ConditionTrue, ReasonReady, MessageReady
	}
	changed := false
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if c.Type != corev1.NodeReady {
			continue
		}
		c.LastHeartbeatTime = now
		if c.Status != want.Status {
			c.LastTransitionTime = now
			changed = true
		}
		c.Status, c.Reason, c.Message = want.Status, want.Reason, want.Message
	}
	taint := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint.Key })
	switch {
	case !cni && !has:
		n.Spec.Taints = append(n.Spec.Taints, taint)
		changed = true
	case cni && has:
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint.Key })
		changed = true
	}
	return changed
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// authorized checks the client certificate as the apiserver's x509
// authenticator and a fresh cluster's RBAC would (see Behaviours).
func (s *Server) authorized(h func(s *Server, w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			s.status(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized", "")
			return
		}
		c := r.TLS.PeerCertificates[0]
		if !slices.Contains(c.Subject.Organization, AdminGroup) {
			s.status(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				fmt.Sprintf("nodes is forbidden: User %q cannot list resource \"nodes\" in API group \"\" at the cluster scope", c.Subject.CommonName), "")
			return
		}
		h(s, w, r)
	}
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	n, ok := s.nodes[name]
	var cp *corev1.Node
	if ok {
		cp = n.DeepCopy()
	}
	s.mu.Unlock()
	if !ok {
		s.status(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("nodes %q not found", name), name)
		return
	}
	writeJSON(w, http.StatusOK, cp)
}

// nameSelector reads fieldSelector=metadata.name=NAME ("" none); other
// selectors are refused as a real server refuses unknown fields.
func nameSelector(r *http.Request) (string, bool) {
	sel := r.URL.Query().Get("fieldSelector")
	if sel == "" {
		return "", true
	}
	name, ok := strings.CutPrefix(sel, "metadata.name=")
	return name, ok && !strings.ContainsAny(name, ",=!")
}

func (s *Server) listOrWatchNodes(w http.ResponseWriter, r *http.Request) {
	name, ok := nameSelector(r)
	if !ok {
		s.status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "field label not supported: "+r.URL.Query().Get("fieldSelector"), "")
		return
	}
	if q := r.URL.Query().Get("watch"); q == "true" || q == "1" {
		s.watchNodes(w, r, name)
		return
	}
	s.mu.Lock()
	list := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rv, 10)}, Items: []corev1.Node{}}
	for _, n := range s.nodeNames() {
		if name == "" || n == name {
			list.Items = append(list.Items, *s.nodes[n].DeepCopy())
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, &list)
}

func (s *Server) watchNodes(w http.ResponseWriter, r *http.Request, name string) {
	ctx := r.Context()
	if t := r.URL.Query().Get("timeoutSeconds"); t != "" {
		secs, err := strconv.Atoi(t)
		if err == nil && secs > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
			defer cancel()
		}
	}
	flusher, _ := w.(http.Flusher)
	s.mu.Lock()
	var (
		pending []event
		from    uint64
	)
	rvParam := r.URL.Query().Get("resourceVersion")
	if rvParam == "" || rvParam == "0" {
		for _, n := range s.nodeNames() {
			pending = append(pending, event{kind: "ADDED", node: *s.nodes[n].DeepCopy()})
		}
		from = s.rv
	} else {
		v, err := strconv.ParseUint(rvParam, 10, 64)
		if err != nil || v > s.rv {
			s.mu.Unlock()
			s.status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "invalid resourceVersion "+rvParam, "")
			return
		}
		if len(s.events) > 0 && v+1 < s.events[0].rv {
			s.mu.Unlock()
			s.status(w, http.StatusGone, metav1.StatusReasonExpired, fmt.Sprintf("too old resource version: %d (%d)", v, s.events[0].rv), "")
			return
		}
		from = v
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(ev event) bool {
		if name != "" && ev.node.Name != name {
			return true
		}
		raw, err := json.Marshal(&ev.node)
		if err != nil {
			return false
		}
		if err := enc.Encode(metav1.WatchEvent{Type: ev.kind, Object: rawExtension(raw)}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	for _, ev := range pending {
		if !send(ev) {
			return
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		s.mu.Lock()
		var next []event
		for _, ev := range s.events {
			if ev.rv > from {
				next = append(next, ev)
			}
		}
		ch, closed := s.changed, s.closed
		s.mu.Unlock()
		for _, ev := range next {
			if !send(ev) {
				return
			}
			from = ev.rv
		}
		if closed {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (s *Server) status(w http.ResponseWriter, code int, reason metav1.StatusReason, msg, name string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code)}
	if name != "" {
		st.Details = &metav1.StatusDetails{Name: name, Kind: "nodes"}
	}
	writeJSON(w, code, &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// ClientCert issues a client certificate from the cluster CA (PEM), as
// Talos' kubeconfig.Generate does for the admin kubeconfig (CN admin,
// O system:masters).
func ClientCert(caCert, caKey []byte, commonName string, groups []string, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	ca, key, err := parseCA(caCert, caKey)
	if err != nil {
		return nil, nil, err
	}
	tc, err := issueFor(ca, key, commonName, groups, nil, x509.ExtKeyUsageClientAuth, lifetime)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(tc.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tc.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// parseCA reads a PEM CA pair; errors never quote the key.
func parseCA(crtPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.X509KeyPair(crtPEM, keyPEM)
	if err != nil {
		return nil, nil, errors.New("kubetest: the Kubernetes CA certificate and key do not form a pair")
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: CA certificate: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("kubetest: CA key of type %T cannot sign", pair.PrivateKey)
	}
	return ca, signer, nil
}

func issue(ca *x509.Certificate, caKey crypto.Signer, cn string, orgs, hosts []string, usage x509.ExtKeyUsage) (tls.Certificate, error) {
	return issueFor(ca, caKey, cn, orgs, hosts, usage, 24*time.Hour)
}

func issueFor(ca *x509.Certificate, caKey crypto.Signer, cn string, orgs, hosts []string, usage x509.ExtKeyUsage, lifetime time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-10 * time.Second), NotAfter: time.Now().Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func rawExtension(raw []byte) runtime.RawExtension { return runtime.RawExtension{Raw: raw} }

// newUID is a stable UID for a node name (a real one is random).
func newUID(name string) types.UID {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:16])
	return types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}
