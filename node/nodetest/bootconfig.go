package nodetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/node/nodetest/kubetest"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// DefaultBootDelay is how long a BootConfig node is away between answering
// the apply and serving as a configured node.
const DefaultBootDelay = 100 * time.Millisecond

// bootConfig is what a node takes from an applied config to come up
// configured: its machine type and the cluster's OS CA (machine.ca).
type bootConfig struct {
	cluster          *ClusterConfig // the Kubernetes side (parseCluster); nil when the config has none
	extensionConfigs []string       // names of its ExtensionServiceConfig documents
	machineType      string         // controlplane, init, worker
	caCrt            []byte         // PEM
	caKey            []byte         // PEM; empty on a worker (trustd of a control plane signs for it)
}

// parseBootConfig reads machine.type and machine.ca of the v1alpha1
// document and nothing else. Its errors never quote the config (yaml's own
// messages may hold values, so they are not wrapped).
func parseBootConfig(data []byte) (*bootConfig, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Version string `yaml:"version"`
			Kind    string `yaml:"kind"`
			Machine struct {
				Type string `yaml:"type"`
				CA   struct {
					Crt string `yaml:"crt"`
					Key string `yaml:"key"`
				} `yaml:"ca"`
			} `yaml:"machine"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no v1alpha1 document with machine.ca")
		}
		if err != nil {
			return nil, fmt.Errorf("config is not YAML of the expected shape")
		}
		if doc.Version != "v1alpha1" || doc.Kind != "" {
			continue
		}
		bc := &bootConfig{machineType: doc.Machine.Type}
		if bc.caCrt, err = base64.StdEncoding.DecodeString(doc.Machine.CA.Crt); err != nil || len(bc.caCrt) == 0 {
			return nil, fmt.Errorf("machine.ca.crt is not base64 PEM")
		}
		if bc.caKey, err = base64.StdEncoding.DecodeString(doc.Machine.CA.Key); err != nil {
			return nil, fmt.Errorf("machine.ca.key is not base64 PEM")
		}
		switch bc.machineType {
		case "controlplane", "init", "worker":
		default:
			return nil, fmt.Errorf("machine.type %q is not controlplane, init or worker", doc.Machine.Type)
		}
		if bc.machineType != "worker" && len(bc.caKey) == 0 {
			return nil, fmt.Errorf("a %s config without machine.ca.key", bc.machineType)
		}
		if bc.cluster, err = parseCluster(data); err != nil {
			return nil, err
		}
		bc.extensionConfigs = extensionConfigNames(data)
		return bc, nil
	}
}

// bootsConfig reports whether an accepted apply makes the node run with the
// config now: every mode that applies at once (auto, no-reboot, reboot),
// not staged (next reboot) or try (reverted; not modelled), never a dry run.
func bootsConfig(in *machine.ApplyConfigurationRequest) bool {
	if in.GetDryRun() {
		return false
	}
	switch in.GetMode() {
	case machine.ApplyConfigurationRequest_AUTO, machine.ApplyConfigurationRequest_NO_REBOOT, machine.ApplyConfigurationRequest_REBOOT:
		return true
	}
	return false
}

// trustd stands for the control planes' trustd: a worker's config holds
// only the CA certificate, and a real worker's apid gets its certificate
// from a control plane. Control plane fakes of this process that run with
// a CA register it here; a worker fake with that CA certificate waits for one.
var trustd = struct {
	mu      sync.Mutex
	cas     map[[32]byte]*trustdEntry
	kube    map[[32]byte]*kubetest.Server // the cluster's Kubernetes API, once a control plane runs one
	changed chan struct{}                 // closed and replaced on each registration
}{cas: map[[32]byte]*trustdEntry{}, changed: make(chan struct{})}

type trustdEntry struct {
	pki  *PKI
	refs int
}

func caID(pki *PKI) [32]byte { return sha256.Sum256(pki.caCert.Raw) }

// trustdRegister makes pki's CA available to workers until the returned
// func is called.
func trustdRegister(pki *PKI) func() {
	id := caID(pki)
	trustd.mu.Lock()
	defer trustd.mu.Unlock()
	e := trustd.cas[id]
	if e == nil {
		e = &trustdEntry{pki: pki}
		trustd.cas[id] = e
	}
	e.refs++
	close(trustd.changed)
	trustd.changed = make(chan struct{})
	var once sync.Once
	return func() {
		once.Do(func() {
			trustd.mu.Lock()
			defer trustd.mu.Unlock()
			if e.refs--; e.refs == 0 {
				delete(trustd.cas, id)
			}
		})
	}
}

// trustdWait returns the PKI of a registered control plane whose CA
// certificate is caCrt (PEM), waiting until one registers or quit closes.
func trustdWait(caCrt []byte, quit <-chan struct{}) (*PKI, error) {
	crt, err := pkiCert(caCrt)
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256(crt)
	for {
		trustd.mu.Lock()
		e, changed := trustd.cas[id], trustd.changed
		trustd.mu.Unlock()
		if e != nil {
			return e.pki, nil
		}
		select {
		case <-changed:
		case <-quit:
			return nil, errors.New("stopped")
		}
	}
}

// pkiCert is the DER of the first certificate of a PEM text.
func pkiCert(crtPEM []byte) ([]byte, error) {
	for rest := crtPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil, errors.New("machine.ca.crt holds no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes, nil
		}
	}
}

// boot is the node coming up with its applied config: the maintenance API
// stops (after this apply's answer has left), the address is silent for
// BootDelay, then a configured Node serves on the same address with the
// config's CA. Called once, in its own goroutine.
func (s *Server) boot(bc *bootConfig, data []byte) {
	defer close(s.booted)
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second): // a client holding a stream open
		s.grpc.Stop()
	}
	<-s.done

	var (
		pki *PKI
		err error
	)
	if len(bc.caKey) > 0 {
		pki, err = PKIFromCA(bc.caCrt, bc.caKey)
	} else {
		s.opts.Logf("boot: worker waiting for a control plane with its machine.ca (trustd) to issue its certificate")
		pki, err = trustdWait(bc.caCrt, s.quit)
	}
	if err != nil {
		s.opts.Logf("boot: staying down: %v", err)
		return
	}
	select {
	case <-time.After(s.opts.BootDelay):
	case <-s.quit:
		return
	}

	schematicID := ""
	for _, md := range s.opts.ExtensionStatuses {
		if md.Name == "schematic" {
			schematicID = md.Version
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	n, err := newNode(NodeOptions{
		Addr: s.Addr(), PKI: pki, TalosVersion: s.opts.TalosVersion, Schematic: s.opts.Schematic,
		Worker: bc.machineType == "worker", Bootstrapped: bc.machineType == "init", // init starts etcd by itself
		Hostname: s.opts.Hostname, MAC: s.opts.MAC, Logf: s.opts.Logf, Cluster: bc.cluster, Config: data,
		Clock: s.opts.Clock, BootTimeout: s.opts.BootTimeout, CNI: s.opts.CNI, CoreDNS: s.opts.CoreDNS,
	}, schematicID)
	if err != nil {
		s.opts.Logf("boot: %v", err)
		return
	}
	s.node = n
	if bc.machineType != "worker" {
		s.unregister = trustdRegister(pki)
	}
	hint := ""
	if bc.machineType == "controlplane" {
		host, _, _ := net.SplitHostPort(s.Addr())
		hint = "; try: talosflash bootstrap --node " + host + " --talosconfig FILE"
	}
	s.opts.Logf("booted with the applied config: a configured %s node (client certificate required)%s", bc.machineType, hint)
}

// configuredExtensions are the extensions whose service waits for an
// ExtensionServiceConfig (`depends: - configuration: true` in their service
// definition in siderolabs/extensions: network/newt/newt.yaml,
// network/cloudflared/cloudflared.yaml, network/tailscale/tailscale.yaml),
// by official name, with the service (and document) name.
var configuredExtensions = map[string]string{
	"siderolabs/newt": "newt", "siderolabs/cloudflared": "cloudflared", "siderolabs/tailscale": "tailscale",
}

// waitingExtensions are the services of the booted image that wait for a
// document the config lacks (configured: those that have it, and run).
func waitingExtensions(sc *schematic.Schematic, names []string, configured bool) []string {
	if sc == nil {
		return nil
	}
	var out []string
	for _, e := range sc.Customization.SystemExtensions.OfficialExtensions {
		if svc, ok := configuredExtensions[e]; ok && slices.Contains(names, svc) == configured {
			out = append(out, svc)
		}
	}
	return out
}

// extensionConfigNames are the names of a config's ExtensionServiceConfig documents.
func extensionConfigNames(data []byte) []string {
	var names []string
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		}
		if err := dec.Decode(&doc); err != nil {
			return names
		}
		if doc.Kind == "ExtensionServiceConfig" && doc.Name != "" {
			names = append(names, doc.Name)
		}
	}
}
