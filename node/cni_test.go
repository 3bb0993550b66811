package node

import (
	"os"
	"testing"
)

// The user's 1.14 config deletes KubeFlannelCNIConfig and disables
// kube-proxy: no Flannel, kube-proxy off; the other forms as Talos reads them.
func TestCNIOf(t *testing.T) {
	cp, err := os.ReadFile("testdata/talos114/valid/controlplane.yaml")
	if err != nil {
		t.Skip(err)
	}
	for name, tc := range map[string]struct {
		config           string
		flannel, noProxy bool
		source           string
	}{
		"user 1.14":        {string(cp), false, true, "no KubeFlannelCNIConfig document"},
		"flannel document": {"version: v1alpha1\nmachine: {}\n---\napiVersion: v1alpha1\nkind: KubeFlannelCNIConfig\nbackendType: vxlan\n", true, false, "a KubeFlannelCNIConfig document"},
		"cni none":         {"version: v1alpha1\ncluster:\n  network:\n    cni:\n      name: none\n  proxy:\n    disabled: true\n", false, true, "cluster.network.cni.name: none"},
		"network default":  {"version: v1alpha1\ncluster:\n  network:\n    dnsDomain: cluster.local\n", true, false, "cluster.network without cni (Flannel is the default)"},
		"v1alpha1 only":    {"version: v1alpha1\ncluster:\n  clusterName: x\n", true, false, "no cluster.network.cni (Flannel is the default)"},
	} {
		c, err := CNIOf([]byte(tc.config))
		if err != nil || c.Flannel != tc.flannel || c.KubeProxyDisabled != tc.noProxy || c.Source != tc.source {
			t.Errorf("%s: %+v %v", name, c, err)
		}
	}
	if _, err := CNIOf([]byte("version: v1alpha1\ncluster: [secret-x")); err == nil || len(err.Error()) > 60 {
		t.Errorf("bad YAML: %v", err)
	}
}
