package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

func init() {
	h := commandHelp["status"]
	h.about += "\n\nKubernetes: when a kubeconfig reaches the cluster (--kubeconfig, else\n" +
		"$KUBECONFIG's first file or ~/.kube/config with a context whose server is one\n" +
		"of the nodes), each Kubernetes node's Ready condition follows, with why it\n" +
		"is NotReady (no CNI yet, read with the control plane's config)."
	h.order = append(h.order, "kubeconfig", "kube-context")
	commandHelp["status"] = h
	placeholders["kubeconfig"] = "FILE"
	placeholders["kube-context"] = "NAME"
}

// kubeFlags are status' Kubernetes flags.
type kubeFlags struct{ path, context string }

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.path, "kubeconfig", "", "kubeconfig for the Kubernetes view (default: $KUBECONFIG's first file, else ~/.kube/config, when a context points at the nodes)")
	fs.StringVar(&k.context, "kube-context", "", "context of the kubeconfig (default: the current one, or the one whose server is a node)")
}

// kubeView is status' Kubernetes section: nil when no kubeconfig reaches
// the nodes (and none was asked for).
type kubeView struct {
	access  *kube.Access
	cni     *node.CNI
	targets []*plan.Member
	key     string
	last    *plan.KubeView
}

// openKubeView finds the kubeconfig and context for the targets.
func openKubeView(k kubeFlags, targets []*plan.Member, cni *node.CNI, callTimeout time.Duration) (*kubeView, error) {
	explicit := k.path != "" || k.context != ""
	path := k.path
	if path == "" {
		p, err := kube.DefaultPath()
		if err != nil {
			return nil, nil
		}
		path = p
	}
	cfg, exists, err := kube.LoadFile(path)
	switch {
	case err != nil && explicit:
		return nil, withCode(contract.ExitUsage, err)
	case err != nil || !exists && !explicit:
		return nil, nil
	case !exists:
		return nil, usageErrorf("status: --kubeconfig %s: no such file (talosflash kubeconfig writes it)", path)
	}
	context := k.context
	if context == "" {
		context = contextFor(cfg, targets, explicit)
	}
	if context == "" {
		return nil, nil
	}
	a, err := kube.Open(path, cfg, context, callTimeout)
	if err != nil {
		if explicit {
			return nil, withCode(contract.ExitUsage, err)
		}
		return nil, nil
	}
	return &kubeView{access: a, cni: cni, targets: targets}, nil
}

// contextFor is the current context when its server is one of the nodes
// (or the file was named), else the first context whose server is.
func contextFor(cfg *clientcmdapi.Config, targets []*plan.Member, explicit bool) string {
	ips := map[string]bool{}
	for _, t := range targets {
		if a := t.Endpoint.Addr(); a.IsValid() {
			ips[a.String()] = true
		}
	}
	points := func(ctx string) bool {
		s, err := kube.Server(cfg, ctx)
		return err == nil && ips[kube.HostOf(s)]
	}
	if cfg.CurrentContext != "" && (explicit || points(cfg.CurrentContext)) {
		return cfg.CurrentContext
	}
	names := make([]string, 0, len(cfg.Contexts))
	for n := range cfg.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if points(n) {
			return n
		}
	}
	return ""
}

// read reads the cluster; emit is called when it changed since the last read.
func (v *kubeView) read(ctx context.Context, emit func(plan.KubeView)) {
	kv := plan.ReadKube(ctx, v.access, v.cni, v.targets)
	if k := kv.Key(); v.last == nil || k != v.key {
		v.key = k
		emit(kv)
	}
	v.last = &kv
}

// renderKube is the text section.
func renderKube(w io.Writer, v plan.KubeView, now time.Time, watch bool) {
	prefix := ""
	if watch {
		prefix = now.Format("15:04:05") + " "
	}
	fmt.Fprintf(w, "%sKubernetes (context %s, %s):\n", prefix, v.Context, v.Server)
	if v.Err != nil {
		fmt.Fprintf(w, "  not answering: %s\n", oneLine(v.Err.Error()))
		return
	}
	if len(v.Nodes) == 0 {
		fmt.Fprintln(w, "  no nodes registered yet")
	}
	for _, n := range v.Nodes {
		state := "Ready"
		if n.Ready != "True" {
			state = "NotReady"
		}
		if n.Diagnosis != nil {
			state = n.Diagnosis.Message
		}
		fmt.Fprintf(w, "  %s: %s\n", n.Name, state)
		if n.Ready != "True" && n.Message != "" {
			fmt.Fprintf(w, "    kubelet: %s: %s\n", n.Reason, n.Message)
		}
		if n.Diagnosis != nil && n.Diagnosis.Fix != "" {
			fmt.Fprintf(w, "    fix: %s\n", n.Diagnosis.Fix)
		}
	}
}

// kubernetesLine is one `kubernetes` line (docs/JSON.md).
type kubernetesLine struct {
	Context   string         `json:"context"`
	Server    string         `json:"server"`
	Time      string         `json:"time"`
	Reachable bool           `json:"reachable"`
	Error     string         `json:"error,omitempty"`
	CNI       *cniJSON       `json:"cni"`
	Nodes     []kubeNodeJSON `json:"nodes"`
	Ready     bool           `json:"all_ready"`
}

type cniJSON struct {
	Flannel           bool   `json:"flannel"`
	Source            string `json:"source"`
	KubeProxyDisabled bool   `json:"kube_proxy_disabled"`
}

type kubeNodeJSON struct {
	Name       string         `json:"name"`
	Hostname   string         `json:"hostname,omitempty"`
	InternalIP string         `json:"internal_ip,omitempty"`
	Ready      string         `json:"ready"`
	Reason     string         `json:"reason,omitempty"`
	Message    string         `json:"message,omitempty"`
	Since      string         `json:"since,omitempty"`
	NoCNI      bool           `json:"no_cni"`
	Diagnosis  *diagnosisJSON `json:"diagnosis"`
}

func kubernetesJSON(v plan.KubeView, now time.Time) kubernetesLine {
	j := kubernetesLine{Context: v.Context, Server: v.Server, Time: now.UTC().Format(time.RFC3339), Nodes: []kubeNodeJSON{}}
	if v.CNI != nil {
		j.CNI = &cniJSON{Flannel: v.CNI.Flannel, Source: v.CNI.Source, KubeProxyDisabled: v.CNI.KubeProxyDisabled}
	}
	if v.Err != nil {
		j.Error = oneLine(v.Err.Error())
		return j
	}
	j.Reachable, j.Ready = true, len(v.Nodes) > 0
	for _, n := range v.Nodes {
		kn := kubeNodeJSON{Name: n.Name, Hostname: n.Hostname, InternalIP: n.InternalIP, Ready: n.Ready, Reason: n.Reason, Message: n.Message, NoCNI: n.NoCNI}
		if !n.Since.IsZero() {
			kn.Since = n.Since.UTC().Format(time.RFC3339)
		}
		if d := n.Diagnosis; d != nil {
			kn.Diagnosis = &diagnosisJSON{Severity: d.Severity, Code: d.Code, Message: d.Message, Fix: d.Fix}
		}
		j.Ready = j.Ready && n.Ready == "True"
		j.Nodes = append(j.Nodes, kn)
	}
	return j
}

// startKubeView opens the Kubernetes view of status and reads it after each
// round of node reads (Round of plan.WatchOptions); nil when there is none.
func startKubeView(f *statusFlags, c *plan.Cluster, targets []*plan.Member, p statusPrinter) (func(context.Context), error) {
	v, err := openKubeView(f.kube, targets, c.CNI(), f.callTimeout)
	if err != nil || v == nil {
		return nil, err
	}
	return func(ctx context.Context) { v.read(ctx, p.Kube) }, nil
}
