package plan

import (
	"strings"
	"testing"

	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// A NotReady node is explained from its Ready condition and, for a missing
// CNI, from the control plane's config when it was read (never assumed).
func TestDiagnoseKubeNode(t *testing.T) {
	noCNI := kube.Node{Name: "worker-1", Ready: "False", Reason: "KubeletNotReady", NoCNI: true,
		Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}
	off := &node.CNI{Source: "no KubeFlannelCNIConfig document", KubeProxyDisabled: true}
	if d := DiagnoseKubeNode(noCNI, off); d == nil || d.Code != "cni-missing" || d.Message != msgNoCNIDisabled || !strings.Contains(d.Fix, "kube-proxy is disabled too") {
		t.Errorf("Flannel off: %+v", d)
	}
	if d := DiagnoseKubeNode(noCNI, &node.CNI{Flannel: true, Source: "a KubeFlannelCNIConfig document"}); d == nil || d.Code != "cni-not-running" || strings.Contains(d.Message, "disabled") {
		t.Errorf("Flannel on: %+v", d)
	}
	if d := DiagnoseKubeNode(noCNI, nil); d == nil || d.Code != "cni-missing" || strings.Contains(d.Message, "disabled in your config") {
		t.Errorf("no config: %+v", d)
	}
	if d := DiagnoseKubeNode(kube.Node{Ready: "False", Reason: "KubeletNotReady", Message: "PLEG is not healthy"}, off); d == nil || d.Code != "node-not-ready" || !strings.Contains(d.Message, "PLEG") {
		t.Errorf("other reason: %+v", d)
	}
	if d := DiagnoseKubeNode(kube.Node{Ready: "True"}, off); d != nil {
		t.Errorf("ready: %+v", d)
	}
}
