package node

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
)

// The Kubernetes node name of a Talos node is its Nodenames resource
// (Nodenames.kubernetes.talos.dev, namespace k8s, ID "nodename";
// internal/app/machined/pkg/controllers/k8s/nodename.go, v1.14.0-rc.1):
// the short hostname, or the FQDN when KubeNodeConfig registerWithFQDN is
// set (v1alpha1 machine.kubelet.registerWithFQDN), lower-cased and cleaned
// into a valid node name. That is the name the kubelet registers and the
// name talosctl upgrade cordons and drains (cmd/talosctl/cmd/talos/upgrade.go
// reads this resource), which need not be the inventory's hostname.

// ReadNodename reads the Kubernetes node name a configured node registers
// with. ok is false when the node has none (no Kubernetes node part in its
// config, or a Talos without the resource).
func ReadNodename(ctx context.Context, endpoint string, tc *Talosconfig, opts WaitOptions) (name string, ok bool, err error) {
	opts = opts.withDefaults()
	if tc == nil {
		return "", false, fmt.Errorf("read node name: %w: none given", ErrTalosconfig)
	}
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return "", false, err
	}
	defer s.Close()
	s.timeout = opts.CallTimeout
	cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()
	name, ok, err = readNodename(cctx, s.c)
	if err != nil {
		return "", false, s.err(cctx, "node name", err)
	}
	return name, ok, nil
}

// readNodename reads the resource; a node without it is ("", false, nil).
func readNodename(ctx context.Context, c *client.Client) (string, bool, error) {
	r, err := safe.StateGetByID[*k8s.Nodename](ctx, c.COSI, k8s.NodenameID)
	if state.IsNotFoundError(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	name := printable(r.TypedSpec().Nodename, 253) // a DNS name at most: a rogue node may send anything
	return name, name != "", nil
}
