package nodetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"gopkg.in/yaml.v3"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/talosflash/talosflash/node/nodetest/kubetest"
)

// ClusterConfig is what a configured fake takes from its machine config
// for its Kubernetes life (parseCluster): the cluster's name and endpoint,
// its Kubernetes CA, whether Talos deploys Flannel.
type ClusterConfig struct {
	Name     string // KubeClusterConfig clusterName / v1alpha1 cluster.clusterName
	Endpoint string // https://host:port: KubeClusterConfig endpoint / cluster.controlPlane.endpoint
	// CACert (PEM) is the Kubernetes CA; CAKey only in a control plane's config.
	CACert, CAKey []byte
	// Flannel: the control plane deploys Flannel at bootstrap (its nodes
	// become Ready without a CNI of the user's).
	Flannel bool
}

// parseCluster reads the Kubernetes side of a config, Talos 1.14
// documents first, then the v1alpha1 fields (the v1alpha1_k8s_bridge
// fallback). nil when the config has neither a cluster name nor an
// endpoint. Its errors never quote the config.
func parseCluster(data []byte) (*ClusterConfig, error) {
	c := &ClusterConfig{}
	var (
		flannelDoc, v1Network bool
		v1CNI                 string
	)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Version     string `yaml:"version"`
			Kind        string `yaml:"kind"`
			ClusterName string `yaml:"clusterName"`
			Endpoint    string `yaml:"endpoint"`
			IssuingCA   struct {
				Cert string `yaml:"cert"`
				Key  string `yaml:"key"`
			} `yaml:"issuingCA"`
			AcceptedCAs []string `yaml:"acceptedCAs"`
			Cluster     struct {
				ClusterName  string `yaml:"clusterName"`
				ControlPlane struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"controlPlane"`
				CA struct {
					Crt string `yaml:"crt"`
					Key string `yaml:"key"`
				} `yaml:"ca"`
				Network *struct {
					CNI *struct {
						Name string `yaml:"name"`
					} `yaml:"cni"`
				} `yaml:"network"`
			} `yaml:"cluster"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("config is not YAML of the expected shape")
		}
		switch {
		case doc.Version == "v1alpha1" && doc.Kind == "":
			cl := doc.Cluster
			c.Name = or(c.Name, cl.ClusterName)
			c.Endpoint = or(c.Endpoint, cl.ControlPlane.Endpoint)
			if cl.CA.Crt != "" && len(c.CACert) == 0 {
				if c.CACert, err = base64.StdEncoding.DecodeString(cl.CA.Crt); err != nil {
					return nil, fmt.Errorf("cluster.ca.crt is not base64 PEM")
				}
				if c.CAKey, err = base64.StdEncoding.DecodeString(cl.CA.Key); err != nil {
					return nil, fmt.Errorf("cluster.ca.key is not base64 PEM")
				}
			}
			if cl.Network != nil {
				v1Network = true
				v1CNI = "flannel" // ClusterConfig.CNI(): the default
				if cl.Network.CNI != nil && cl.Network.CNI.Name != "" {
					v1CNI = cl.Network.CNI.Name
				}
			}
		case doc.Kind == "KubeClusterConfig":
			c.Name, c.Endpoint = or(doc.ClusterName, c.Name), or(doc.Endpoint, c.Endpoint)
		case doc.Kind == "KubeAPIServerCAConfig":
			if doc.IssuingCA.Cert != "" {
				c.CACert, c.CAKey = []byte(doc.IssuingCA.Cert), []byte(doc.IssuingCA.Key)
			} else if len(doc.AcceptedCAs) > 0 {
				c.CACert, c.CAKey = []byte(doc.AcceptedCAs[0]), nil
			}
		case doc.Kind == "KubeFlannelCNIConfig":
			flannelDoc = true
		}
	}
	if c.Name == "" && c.Endpoint == "" {
		return nil, nil
	}
	// container.go K8sFlannelCNIConfig: the document, else the v1alpha1
	// section, which deploys Flannel only when present and named flannel.
	c.Flannel = flannelDoc || v1Network && v1CNI == "flannel"
	return c, nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// nodename is the Kubernetes node name Talos registers: the Nodenames
// resource (hostname.go), else the short hostname in lower case.
func (n *Node) nodename() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.nodenameLocked(); ok {
		return name
	}
	host, _, _ := strings.Cut(n.hostname, ".")
	return strings.ToLower(host)
}

func (n *Node) ip() string { h, _, _ := net.SplitHostPort(n.addr); return h }

// kubeAPI is the cluster's fake API once a control plane of this node's OS
// CA runs one (after its bootstrap), else nil.
func (n *Node) kubeAPI() *kubetest.Server {
	trustd.mu.Lock()
	defer trustd.mu.Unlock()
	return trustd.kube[caID(n.opts.PKI)]
}

// living: the node's stage and conditions follow its state (a config
// with a cluster), instead of NodeOptions.Stage/Unmet.
func (n *Node) living() bool { return n.opts.Cluster != nil }

// lifeUnmet are MachineStatus' unmet conditions of a living node
// (controllers/runtime/machine_status.go: services, nodeReady).
func (n *Node) lifeUnmet() []runtime.UnmetCondition {
	var unmet []runtime.UnmetCondition
	n.mu.Lock()
	boot := !n.opts.Worker && !n.bootstrapped
	n.mu.Unlock()
	if boot {
		unmet = append(unmet, runtime.UnmetCondition{Name: "services", Reason: "etcd not running"})
	}
	name := n.nodename()
	api := n.kubeAPI()
	ready, registered := false, false
	if api != nil {
		ready, registered = api.NodeReady(name)
	}
	switch {
	case !registered:
		unmet = append(unmet, runtime.UnmetCondition{Name: "nodeReady", Reason: fmt.Sprintf("node %q status is not available yet", name)})
	case !ready:
		unmet = append(unmet, runtime.UnmetCondition{Name: "nodeReady", Reason: fmt.Sprintf("node %q is not ready", name)})
	}
	return unmet
}

// cosiAccess is the node's COSI access policy (resources.go); a read of
// MachineStatus first brings it up to date (the controllers would have).
func (n *Node) cosiAccess(st state.State) func(context.Context, state.Access) error {
	policy := accessPolicy114(st, isAdmin)
	return func(ctx context.Context, a state.Access) error {
		if err := policy(ctx, a); err != nil {
			return err
		}
		if a.ResourceType == config.MachineConfigType {
			n.mu.Lock()
			n.configReads++
			n.mu.Unlock()
		}
		if a.ResourceType == runtime.MachineStatusType {
			n.sync()
		}
		return nil
	}
}

// watchCluster keeps MachineStatus (and its event) in step with the
// cluster's API: nodeReady changes there, not on the node (a CNI
// installed, the API going away). Living nodes only; ends with the node.
func (n *Node) watchCluster() {
	if !n.living() {
		return
	}
	for {
		trustd.mu.Lock()
		api, changed := trustd.kube[caID(n.opts.PKI)], trustd.changed
		trustd.mu.Unlock()
		var apiChanged <-chan struct{}
		if api != nil {
			apiChanged = api.Changed()
		}
		n.sync()
		select {
		case <-changed:
		case <-apiChanged:
		case <-n.stop:
			return
		}
	}
}

// startKubelet registers the node in the cluster's API once a control
// plane runs one, as the kubelet does (retrying until the API answers).
func (n *Node) startKubelet() {
	if !n.living() {
		return
	}
	go func() {
		for {
			trustd.mu.Lock()
			api, changed := trustd.kube[caID(n.opts.PKI)], trustd.changed
			trustd.mu.Unlock()
			if api != nil {
				api.RegisterNode(n.nodename(), n.ip(), !n.opts.Worker)
				return
			}
			select {
			case <-changed:
			case <-n.stop:
				return
			}
		}
	}()
}

// startKubeAPI is the control plane's kube-apiserver coming up after the
// bootstrap: on the node's address at the endpoint's port, with the
// config's Kubernetes CA. Caller holds no lock.
func (n *Node) startKubeAPI() {
	c := n.opts.Cluster
	if c == nil || n.opts.Worker || len(c.CAKey) == 0 {
		return
	}
	u, err := url.Parse(c.Endpoint)
	port := "6443"
	if err == nil && u.Port() != "" {
		port = u.Port()
	}
	hosts := []string{n.ip()}
	if err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	api, err := kubetest.New(kubetest.Options{Addr: net.JoinHostPort(n.ip(), port), CACert: c.CACert, CAKey: c.CAKey,
		Hosts: hosts, CNIInstalled: c.Flannel || n.opts.CNI, CoreDNS: n.opts.CoreDNS, Logf: n.opts.Logf})
	if err != nil {
		n.opts.Logf("kube-apiserver: %v", err)
		return
	}
	n.mu.Lock()
	if n.kube != nil || n.closed {
		n.mu.Unlock()
		api.Close()
		return
	}
	n.kube = api
	n.mu.Unlock()
	id := caID(n.opts.PKI)
	trustd.mu.Lock()
	if trustd.kube == nil {
		trustd.kube = map[[32]byte]*kubetest.Server{}
	}
	trustd.kube[id] = api
	close(trustd.changed)
	trustd.changed = make(chan struct{})
	trustd.mu.Unlock()
	n.opts.Logf("kube-apiserver: serving %s", api.URL())
}

// stopKubeAPI ends the control plane's API (Close).
func (n *Node) stopKubeAPI() {
	n.mu.Lock()
	api := n.kube
	n.kube = nil
	n.mu.Unlock()
	if api == nil {
		return
	}
	trustd.mu.Lock()
	if id := caID(n.opts.PKI); trustd.kube[id] == api {
		delete(trustd.kube, id)
	}
	trustd.mu.Unlock()
	api.Close()
}

// KubeAPI is the control plane's fake Kubernetes API (after bootstrap), else nil.
func (n *Node) KubeAPI() *kubetest.Server { n.mu.Lock(); defer n.mu.Unlock(); return n.kube }

// Kubeconfig is v1alpha1_server.go's: control planes only, generated from
// the config (pkg/kubeconfig/generate.go GenerateAdmin: cluster
// <clusterName> at the endpoint, user and context admin@<clusterName>, a
// client certificate of CN admin, O system:masters from the Kubernetes CA),
// sent as one message of a .tar.gz holding "kubeconfig" (mode 0600; the tar
// writer is not closed, so the archive has no end-of-archive blocks).
func (n *Node) Kubeconfig(_ *emptypb.Empty, srv grpc.ServerStreamingServer[common.Data]) error {
	if n.opts.Worker {
		return status.Error(codes.Unimplemented, "kubeconfig is only available on control plane nodes")
	}
	c := n.opts.Cluster
	if c == nil || len(c.CAKey) == 0 {
		return status.Error(codes.FailedPrecondition, "k8s API server CA config is not set")
	}
	crt, key, err := kubetest.ClientCert(c.CACert, c.CAKey, "admin", []string{kubetest.AdminGroup}, 365*24*time.Hour)
	if err != nil {
		return status.Errorf(codes.Internal, "error generating Kubernetes client certificate: %v", err)
	}
	user := "admin@" + c.Name
	cfg := clientcmdapi.Config{
		APIVersion: "v1", Kind: "Config",
		Clusters:       map[string]*clientcmdapi.Cluster{c.Name: {Server: c.Endpoint, CertificateAuthorityData: c.CACert}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificateData: crt, ClientKeyData: key}},
		Contexts:       map[string]*clientcmdapi.Context{user: {Cluster: c.Name, Namespace: "default", AuthInfo: user}},
		CurrentContext: user,
	}
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "kubeconfig", Size: int64(len(data)), ModTime: time.Now(), Mode: 0o600}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	n.mu.Lock()
	n.kubeconfigs++
	n.mu.Unlock()
	return srv.Send(&common.Data{Bytes: buf.Bytes()})
}

// KubeconfigCalls counts Kubeconfig calls answered.
func (n *Node) KubeconfigCalls() int { n.mu.Lock(); defer n.mu.Unlock(); return n.kubeconfigs }

// ClusterOf is the Kubernetes side of a config (NodeOptions.Cluster), as
// a node booted with it lives it: for a configured node a test starts
// directly (StartNode) rather than through an apply.
func ClusterOf(config []byte) (*ClusterConfig, error) { return parseCluster(config) }
