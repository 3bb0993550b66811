package kube

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/talosflash/talosflash/internal/printable"
)

// Node is one Kubernetes node's Ready condition, in the cluster's words
// (bounded and made printable: a cluster's messages are shown as read).
type Node struct {
	Name       string
	InternalIP string
	Ready      string // "True", "False", "Unknown" (no Ready condition yet)
	Reason     string // e.g. KubeletNotReady
	Message    string // e.g. the kubelet's "container runtime network not ready: ..."
	Since      time.Time
	// NoCNI: the kubelet says the container runtime's network (the CNI)
	// is not ready.
	NoCNI bool
}

// Access is one context of a kubeconfig to reach a cluster with.
type Access struct {
	Path    string
	Context string
	Server  string
	rest    *rest.Config
}

// Open builds a client configuration from a kubeconfig's context ("" its
// current one). Errors name the file and the context, never its keys.
func Open(path string, cfg *clientcmdapi.Config, context string, timeout time.Duration) (*Access, error) {
	if context == "" {
		context = cfg.CurrentContext
	}
	server, err := Server(cfg, context)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: context %q: %w", path, context, ErrKubeconfig)
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rc.Timeout = timeout
	return &Access{Path: path, Context: context, Server: server, rest: rc}, nil
}

// HostOf is a server URL's host ("" when it is not a URL).
func HostOf(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Nodes lists the cluster's nodes (GET /api/v1/nodes), by name.
func (a *Access) Nodes(ctx context.Context) ([]Node, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	list := &corev1.NodeList{}
	if err := c.Get().Resource("nodes").Do(ctx).Into(list); err != nil {
		return nil, fmt.Errorf("list the nodes at %s (context %s): %s", a.Server, a.Context, printable.String(oneLine(err.Error())))
	}
	out := make([]Node, 0, len(list.Items))
	for _, n := range list.Items {
		out = append(out, nodeOf(n))
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func nodeOf(n corev1.Node) Node {
	out := Node{Name: bounded(n.Name, 253), Ready: "Unknown"}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address) != nil && out.InternalIP == "" {
			out.InternalIP = a.Address
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		out.Ready, out.Reason, out.Message = bounded(string(c.Status), 16), bounded(c.Reason, 128), bounded(c.Message, 1024)
		out.Since = c.LastTransitionTime.Time
	}
	out.NoCNI = out.Ready != "True" && NoCNI(out.Message)
	return out
}

// NoCNI reports whether a Ready condition's message is the kubelet saying
// the runtime's network is not ready for want of a CNI: "container runtime
// network not ready: NetworkReady=false reason:NetworkPluginNotReady
// message:Network plugin returns error: cni plugin not initialized"
// (kubernetes pkg/kubelet/kubelet.go updateRuntimeUp, containerd's CRI
// status; older runtimes: "cni config uninitialized").
func NoCNI(message string) bool {
	m := strings.ToLower(message)
	return strings.Contains(m, "networkready=false") &&
		(strings.Contains(m, "networkpluginnotready") || strings.Contains(m, "cni plugin not initialized") || strings.Contains(m, "cni config uninitialized"))
}

func bounded(s string, max int) string { return printable.Bounded(s, max) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
