package plan

import (
	"context"
	"fmt"
	"strings"

	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// KubeNode is one Kubernetes node and what talosflash makes of its Ready
// condition.
type KubeNode struct {
	kube.Node
	// Hostname is the inventory node it is ("" when none matches).
	Hostname  string
	Diagnosis *Diagnosis // nil when Ready
}

// KubeView is the cluster as its Kubernetes API says.
type KubeView struct {
	Context, Server string
	Nodes           []KubeNode
	Err             error // the API did not answer
	// CNI is what the control plane's config says (nil: no config read).
	CNI *node.CNI
}

// Key is what --watch compares between reads.
func (v KubeView) Key() string {
	if v.Err != nil {
		return "err"
	}
	var b strings.Builder
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "%s=%s/%s;", n.Name, n.Ready, n.Reason)
	}
	return b.String()
}

// ReadKube lists the nodes through a, matching them to the targets (by
// name, then internal IP) and explaining each one not Ready.
func ReadKube(ctx context.Context, a *kube.Access, cni *node.CNI, targets []*Member) KubeView {
	v := KubeView{Context: a.Context, Server: a.Server, CNI: cni}
	nodes, err := a.Nodes(ctx)
	if err != nil {
		v.Err = err
		return v
	}
	for _, n := range nodes {
		kn := KubeNode{Node: n, Hostname: matchTarget(n, targets)}
		kn.Diagnosis = DiagnoseKubeNode(n, cni)
		v.Nodes = append(v.Nodes, kn)
	}
	return v
}

func matchTarget(n kube.Node, targets []*Member) string {
	for _, t := range targets {
		if t.Hostname != "" && strings.EqualFold(t.KubeName(), n.Name) {
			return t.Hostname
		}
	}
	for _, t := range targets {
		if a := t.Endpoint.Addr(); a.IsValid() && n.InternalIP == a.String() && t.Hostname != "" {
			return t.Hostname
		}
	}
	return ""
}

// Messages of the Kubernetes view.
const (
	msgNoCNIDisabled = "NotReady: no CNI yet — Flannel is disabled in your config; install your CNI (e.g. Cilium) now"
)

// DiagnoseKubeNode explains a node that is not Ready, from its Ready
// condition and, for a missing CNI, the control plane's config (nil: not
// read, so nothing is said about Flannel).
func DiagnoseKubeNode(n kube.Node, cni *node.CNI) *Diagnosis {
	switch {
	case n.Ready == "True":
		return nil
	case n.NoCNI && cni != nil && !cni.Flannel:
		fix := "the nodes turn Ready once the CNI's pods run on them (Flannel is off: " + cni.Source + ")"
		if cni.KubeProxyDisabled {
			fix += "; kube-proxy is disabled too, so choose a CNI that replaces it (Cilium with kubeProxyReplacement=true)"
		}
		return &Diagnosis{Severity: "warning", Code: "cni-missing", Message: msgNoCNIDisabled, Fix: fix}
	case n.NoCNI && cni != nil:
		return &Diagnosis{Severity: "warning", Code: "cni-not-running",
			Message: "NotReady: no CNI yet, though your config deploys Flannel (" + cni.Source + "): its pods do not run on this node yet",
			Fix:     "kubectl -n kube-system get pods -l app=flannel -o wide"}
	case n.NoCNI:
		return &Diagnosis{Severity: "warning", Code: "cni-missing",
			Message: "NotReady: no CNI yet (the kubelet: cni plugin not initialized); install your CNI (e.g. Cilium) unless Talos deploys Flannel for you",
			Fix:     "give the control plane's config (status --inventory) to know whether Talos deploys Flannel"}
	case n.Ready == "Unknown" && n.Reason == "":
		return &Diagnosis{Severity: "info", Code: "node-not-reported", Message: "the kubelet has not reported the node's Ready condition yet"}
	}
	return &Diagnosis{Severity: "warning", Code: "node-not-ready", Message: fmt.Sprintf("NotReady: %s: %s", orNone(n.Reason), orNone(n.Message))}
}
