package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"google.golang.org/protobuf/types/known/emptypb"
	"gopkg.in/yaml.v3"
)

// A configured node's hostname and Kubernetes node name (Talos v1.14.0-rc.1):
//
//   - hostnames come in layers (pkg/machinery/resources/network/configlayer.go:
//     default < cmdline < platform < operator < configuration) and the
//     highest wins (controllers/network/hostname_merge.go). A card's META
//     0x0a hostname is the platform layer (controllers/network/
//     platform_config_apply.go); a config's static hostname is the
//     configuration layer: HostnameConfig `hostname`, or without a
//     HostnameConfig document v1alpha1 machine.network.hostname
//     (container.go NetworkHostnameConfig, controllers/network/
//     hostname_config.go parseMachineConfiguration). `auto: stable` (what gen
//     config writes) only adds a default-layer name, which never beats the
//     card's. The fake's NodeOptions.Hostname is the name below the
//     configuration layer (the card's, fakenode's --hostname, or the
//     maintenance default); a static config hostname replaces it as soon as
//     the config applies.
//   - the Kubernetes node name is the Nodenames resource
//     (controllers/k8s/nodename.go, namespace k8s, ID nodename): the short
//     hostname, or the FQDN when KubeNodeConfig registerWithFQDN is true
//     (v1alpha1 machine.kubelet.registerWithFQDN without that document),
//     made a valid node name by controllers/k8s/internal/nodename
//     FromHostname (lower case, "_" to "-", other characters dropped, "-"
//     and "." trimmed at both ends). No config with a node part: no resource.

// nodeConfig is what a config says about the hostname and the node name.
type nodeConfig struct {
	hostname         string // the configuration layer's hostname ("" = none)
	hasNodeConfig    bool   // K8sNodeConfig() != nil
	registerWithFQDN bool
}

// parseNodeConfig reads those fields of every document. Errors are never
// returned: a config the node accepted is valid YAML.
func parseNodeConfig(data []byte) nodeConfig {
	var (
		nc                      nodeConfig
		hostnameDoc, kubeDoc    bool
		v1Host                  string
		v1FQDN, v1Machine, v1Cl bool
	)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Version          string `yaml:"version"`
			Kind             string `yaml:"kind"`
			Hostname         string `yaml:"hostname"`
			RegisterWithFQDN bool   `yaml:"registerWithFQDN"`
			Machine          *struct {
				Network *struct {
					Hostname string `yaml:"hostname"`
				} `yaml:"network"`
				Kubelet *struct {
					RegisterWithFQDN bool `yaml:"registerWithFQDN"`
				} `yaml:"kubelet"`
			} `yaml:"machine"`
			Cluster *yaml.Node `yaml:"cluster"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		switch {
		case doc.Kind == "HostnameConfig" && !hostnameDoc:
			hostnameDoc, nc.hostname = true, doc.Hostname
		case doc.Kind == "KubeNodeConfig" && !kubeDoc:
			kubeDoc, nc.registerWithFQDN = true, doc.RegisterWithFQDN
		case doc.Version == "v1alpha1" && doc.Kind == "":
			v1Machine, v1Cl = doc.Machine != nil, doc.Cluster != nil
			if doc.Machine != nil && doc.Machine.Network != nil {
				v1Host = doc.Machine.Network.Hostname
			}
			if doc.Machine != nil && doc.Machine.Kubelet != nil {
				v1FQDN = doc.Machine.Kubelet.RegisterWithFQDN
			}
		}
	}
	if !hostnameDoc {
		nc.hostname = v1Host
	}
	switch {
	case kubeDoc:
		nc.hasNodeConfig = true
	case v1Machine || v1Cl: // v1alpha1_k8s_bridge.go K8sNodeConfig
		nc.hasNodeConfig, nc.registerWithFQDN = true, v1FQDN
	}
	return nc
}

// applyHostnameLocked sets the node's hostname from its config by layer
// (caller holds n.mu).
func (n *Node) applyHostnameLocked() {
	n.hostname = n.opts.Hostname
	if n.config == nil {
		return
	}
	if h := parseNodeConfig(n.config).hostname; h != "" {
		n.hostname = h
	}
}

// CurrentHostname is the hostname the node reports now (HostnameStatus,
// as an FQDN when it has a domain).
func (n *Node) CurrentHostname() string { n.mu.Lock(); defer n.mu.Unlock(); return n.hostname }

// Hostname is MachineService.Hostname (v1alpha1_server.go): the FQDN.
func (n *Node) Hostname(context.Context, *emptypb.Empty) (*machine.HostnameResponse, error) {
	return &machine.HostnameResponse{Messages: []*machine.Hostname{{Hostname: n.CurrentHostname()}}}, nil
}

// nodenameLocked is the Nodenames resource's value ("", false without one).
func (n *Node) nodenameLocked() (string, bool) {
	var nc nodeConfig
	if n.config != nil {
		nc = parseNodeConfig(n.config)
	} else {
		nc.hasNodeConfig = true // started without a config: a node of a cluster
	}
	if !nc.hasNodeConfig {
		return "", false
	}
	host, _ := splitFQDN(n.hostname)
	if nc.registerWithFQDN {
		host = n.hostname
	}
	name, err := nodenameFromHostname(host)
	return name, err == nil
}

// nodenameFromHostname is controllers/k8s/internal/nodename FromHostname.
func nodenameFromHostname(hostname string) (string, error) {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		case r == '_':
			return '-'
		}
		return -1
	}, hostname)
	name = strings.Trim(name, "-.")
	if name == "" {
		return "", fmt.Errorf("could not convert hostname %q to a valid Kubernetes Node name", hostname)
	}
	return name, nil
}

// syncHostname updates HostnameStatus and Nodenames in the boot's state
// after a config change.
func (n *Node) syncHostname(ctx context.Context, st state.State) error {
	n.mu.Lock()
	host, dom := splitFQDN(n.hostname)
	name, ok := n.nodenameLocked()
	n.mu.Unlock()
	if _, err := safe.StateUpdateWithConflicts(ctx, st, network.NewHostnameStatus(network.NamespaceName, network.HostnameID).Metadata(),
		func(r *network.HostnameStatus) error {
			r.TypedSpec().Hostname, r.TypedSpec().Domainname = host, dom
			return nil
		}); err != nil {
		return err
	}
	return putNodename(ctx, st, name, ok)
}

// putNodename creates, updates or (without a node config) removes the
// Nodenames resource.
func putNodename(ctx context.Context, st state.State, name string, ok bool) error {
	md := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata()
	cur, err := safe.StateGet[*k8s.Nodename](ctx, st, md)
	switch {
	case err != nil && !state.IsNotFoundError(err):
		return err
	case !ok:
		if err == nil {
			return st.Destroy(ctx, md)
		}
		return nil
	case state.IsNotFoundError(err):
		r := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)
		r.TypedSpec().Nodename, r.TypedSpec().HostnameVersion = name, "1"
		return st.Create(ctx, r)
	case cur.TypedSpec().Nodename == name:
		return nil
	}
	_, err = safe.StateUpdateWithConflicts(ctx, st, md, func(r *k8s.Nodename) error {
		r.TypedSpec().Nodename = name
		return nil
	})
	return err
}
