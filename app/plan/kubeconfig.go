package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// KubeconfigJob is `talosflash kubeconfig`: the cluster's admin kubeconfig
// from a control plane, merged into the user's kubeconfig (or written).
type KubeconfigJob struct {
	// Node names the control plane asked (its inventory hostname, or its
	// address); Endpoint is its Talos API (host:port).
	Node, Endpoint string
	Talosconfig    *node.Talosconfig
	// ControlPlanes are the addresses of every known control plane (the
	// inventory's, or the one asked): an API endpoint at one of them is
	// kept as the config names it.
	ControlPlanes []netip.Addr
	// Path is the file to merge into (created when missing); "": the
	// default (kube.DefaultPath). A directory gets a file "kubeconfig" in
	// it, as talosctl does.
	Path string
	// Force replaces entries of the same name instead of renaming the new
	// ones (talosctl kubeconfig --force).
	Force bool
	// Reach checks that this machine reaches the API at host:port (default:
	// a TCP connection within 3 s). Tests give their own.
	Reach func(ctx context.Context, hostport string) error
	// Fetch asks the node (default node.FetchKubeconfig).
	Fetch func(ctx context.Context, endpoint string, tc *node.Talosconfig) ([]byte, error)
}

// Server choices (KubeconfigOutcome.ServerChoice).
const (
	ServerControlPlane = "control-plane" // the config's endpoint is a control plane's address: kept
	ServerReachable    = "reachable"     // a name or another address (a VIP, a load balancer) that answers: kept
	ServerReplaced     = "replaced"      // it does not answer from here: the control plane's address instead
)

// KubeconfigOutcome says what was written, never a key.
type KubeconfigOutcome struct {
	Path    string
	Merged  bool // into an existing file (else a new file)
	Cluster string
	Context string // now the current context
	// Server is the API URL written; ConfigServer the one the node's
	// kubeconfig named (the config's cluster endpoint); ServerChoice and
	// ServerNote say why they differ or not.
	Server, ConfigServer string
	ServerChoice         string
	ServerNote           string
	Renamed              []kube.Rename
	Overwritten          []string
}

// Kubeconfig fetches the admin kubeconfig, chooses its API endpoint and
// merges it into the target file (0600).
func Kubeconfig(ctx context.Context, j KubeconfigJob) (*KubeconfigOutcome, error) {
	fetch := j.Fetch
	if fetch == nil {
		fetch = node.FetchKubeconfig
	}
	data, err := fetch(ctx, j.Endpoint, j.Talosconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig from %s: %w", j.Node, err)
	}
	src, err := kube.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig %s sent: %w", j.Node, err)
	}
	out := &KubeconfigOutcome{}
	if out.ConfigServer, err = kube.Server(src, ""); err != nil {
		return nil, fmt.Errorf("the kubeconfig %s sent: %w", j.Node, err)
	}
	if c := src.Contexts[src.CurrentContext]; c != nil {
		out.Cluster = c.Cluster
	}
	out.Server, out.ServerChoice, out.ServerNote = j.chooseServer(ctx, out.ConfigServer)
	if out.Server != out.ConfigServer {
		if err := kube.SetServer(src, "", out.Server); err != nil {
			return nil, err
		}
	}

	path := j.Path
	if path == "" {
		if path, err = kube.DefaultPath(); err != nil {
			return nil, err
		}
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "kubeconfig")
	}
	out.Path = path
	dst, exists, err := kube.LoadFile(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		dst = src.DeepCopy()
		dst.Clusters, dst.AuthInfos, dst.Contexts = nil, nil, nil
	}
	out.Merged = exists
	res := kube.Merge(dst, src, j.Force)
	out.Context, out.Renamed, out.Overwritten = res.Context, res.Renamed, res.Overwritten
	if err := kube.WriteFile(path, dst); err != nil {
		return nil, err
	}
	return out, nil
}

// chooseServer keeps the config's endpoint when it is a control plane's
// address or answers from this machine, else points at the control plane
// asked (its address, the endpoint's port): Talos puts the node's addresses
// in the API server's certificate.
func (j KubeconfigJob) chooseServer(ctx context.Context, server string) (string, string, string) {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return server, ServerReachable, "the kubeconfig's server is not a URL: kept as it is"
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	if a, err := netip.ParseAddr(host); err == nil && slices.Contains(j.ControlPlanes, a.Unmap()) {
		return server, ServerControlPlane, fmt.Sprintf("%s, the config's endpoint, is a control plane's address", host)
	}
	reach := j.Reach
	if reach == nil {
		reach = dialReach
	}
	rerr := reach(ctx, net.JoinHostPort(host, port))
	if rerr == nil {
		return server, ServerReachable, fmt.Sprintf("%s, the config's endpoint, answers from this machine", net.JoinHostPort(host, port))
	}
	cp, _, err := net.SplitHostPort(j.Endpoint)
	if err != nil {
		cp = j.Endpoint
	}
	kind := "a name"
	if _, err := netip.ParseAddr(host); err == nil {
		kind = "an address of no control plane (a VIP or a load balancer?)"
	}
	u.Host = net.JoinHostPort(cp, port)
	return u.String(), ServerReplaced, fmt.Sprintf("the config's endpoint %s is %s and does not answer from this machine (%v): the kubeconfig points at %s (%s) instead",
		server, kind, oneLineErr(rerr), u.String(), j.Node)
}

func dialReach(ctx context.Context, hostport string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	c, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return errors.New("no answer within 3 s")
		}
		return err
	}
	return c.Close()
}

func oneLineErr(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
