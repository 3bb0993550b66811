package node

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// CNI is what a control plane's config says about the cluster's pod
// network, read as Talos decides it (siderolabs/talos v1.14.0-rc.1):
//   - a KubeFlannelCNIConfig document: Talos deploys Flannel
//     (pkg/machinery/config/container/container.go K8sFlannelCNIConfig,
//     internal/app/machined/pkg/controllers/k8s/control_plane.go);
//   - else the v1alpha1 cluster.network section: Flannel when its
//     cni.name is flannel or unset (v1alpha1_clusterconfig.go CNI: the
//     default), none for "none" or "custom" (constants NoneCNI, CustomCNI);
//   - a 1.14 config (Kube* documents) with neither: no Flannel
//     (v1alpha1_k8s_bridge.go: "multi-doc should provide it"), which is
//     what a patch deleting KubeFlannelCNIConfig leaves;
//   - a v1alpha1-only config without cluster.network: Flannel (the default).
//
// kube-proxy: KubeProxyConfig enabled: false, or cluster.proxy.disabled: true.
type CNI struct {
	Flannel bool
	// Source says where that was read, e.g. "no KubeFlannelCNIConfig document".
	Source string
	// KubeProxyDisabled: the config disables kube-proxy (a CNI must replace it).
	KubeProxyDisabled bool
}

// CNIOf reads a control plane config's CNI. Its errors never quote the config.
func CNIOf(config []byte) (CNI, error) {
	var (
		c                     CNI
		flannelDoc, kubeDocs  bool
		v1Network, v1HasCNI   bool
		v1CNIName             string
		proxyDoc, proxyV1Flag *bool
	)
	dec := yaml.NewDecoder(bytes.NewReader(config))
	for {
		var doc struct {
			Version string `yaml:"version"`
			Kind    string `yaml:"kind"`
			Enabled *bool  `yaml:"enabled"`
			Cluster struct {
				Network *struct {
					CNI *struct {
						Name string `yaml:"name"`
					} `yaml:"cni"`
				} `yaml:"network"`
				Proxy struct {
					Disabled *bool `yaml:"disabled"`
				} `yaml:"proxy"`
			} `yaml:"cluster"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return CNI{}, errors.New("config: not YAML of the expected shape")
		}
		switch {
		case doc.Version == "v1alpha1" && doc.Kind == "":
			if n := doc.Cluster.Network; n != nil {
				v1Network = true
				if n.CNI != nil && n.CNI.Name != "" {
					v1HasCNI, v1CNIName = true, n.CNI.Name
				}
			}
			proxyV1Flag = doc.Cluster.Proxy.Disabled
		case doc.Kind == "KubeFlannelCNIConfig":
			flannelDoc, kubeDocs = true, true
		case doc.Kind == "KubeProxyConfig":
			proxyDoc, kubeDocs = doc.Enabled, true
		case strings.HasPrefix(doc.Kind, "Kube"):
			kubeDocs = true
		}
	}
	switch {
	case flannelDoc:
		c.Flannel, c.Source = true, "a KubeFlannelCNIConfig document"
	case v1Network && v1HasCNI:
		c.Flannel, c.Source = v1CNIName == "flannel", "cluster.network.cni.name: "+v1CNIName
	case v1Network:
		c.Flannel, c.Source = true, "cluster.network without cni (Flannel is the default)"
	case kubeDocs:
		c.Source = "no KubeFlannelCNIConfig document"
	default:
		c.Flannel, c.Source = true, "no cluster.network.cni (Flannel is the default)"
	}
	c.KubeProxyDisabled = proxyDoc != nil && !*proxyDoc || proxyV1Flag != nil && *proxyV1Flag
	return c, nil
}
