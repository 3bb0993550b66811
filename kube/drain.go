package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"

	"github.com/talosflash/talosflash/internal/printable"
)

// Drain defaults: talosctl v1.14's (cmd/talosctl/pkg/talos/nodedrain:
// DefaultDrainTimeout 5 min) and kubectl drain's retry of an eviction a
// PodDisruptionBudget refuses (k8s.io/kubectl pkg/cmd/drain: 5 s).
const (
	DefaultDrainTimeout    = 5 * time.Minute
	DefaultEvictRetryDelay = 5 * time.Second
)

// DrainOptions bound a drain.
type DrainOptions struct {
	Timeout         time.Duration // the whole eviction; default DefaultDrainTimeout
	EvictRetryDelay time.Duration // after a refused eviction (429: a PodDisruptionBudget); default DefaultEvictRetryDelay
	// Progress gets a line per pod evicted (or failing to be).
	Progress func(string)
}

// ErrNodeNotFound: no Kubernetes node of that name.
var ErrNodeNotFound = errors.New("no such Kubernetes node")

func (a *Access) clientset() (kubernetes.Interface, error) {
	c, err := kubernetes.NewForConfig(a.rest)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", a.Server, err)
	}
	return c, nil
}

// Cordon marks the node unschedulable (kubectl's drain.RunCordonOrUncordon,
// as talosctl v1.14's nodedrain.Cordon).
func (a *Access) Cordon(ctx context.Context, name string) error { return a.cordon(ctx, name, true) }

// Uncordon marks it schedulable again; a node that no longer exists is no error.
func (a *Access) Uncordon(ctx context.Context, name string) error { return a.cordon(ctx, name, false) }

func (a *Access) cordon(ctx context.Context, name string, on bool) error {
	c, err := a.clientset()
	if err != nil {
		return err
	}
	verb := "cordon"
	if !on {
		verb = "uncordon"
	}
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if !on {
			return nil
		}
		return fmt.Errorf("%s %s: %w", verb, printable.String(name), ErrNodeNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %s", verb, printable.String(name), apiError(err))
	}
	if err := drain.RunCordonOrUncordon(&drain.Helper{Ctx: ctx, Client: c, Out: io.Discard, ErrOut: io.Discard}, n, on); err != nil {
		return fmt.Errorf("%s %s: %s", verb, printable.String(name), apiError(err))
	}
	return nil
}

// Unschedulable reports whether the node is cordoned.
func (a *Access) Unschedulable(ctx context.Context, name string) (bool, error) {
	c, err := a.clientset()
	if err != nil {
		return false, err
	}
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("node %s: %s", printable.String(name), apiError(err))
	}
	return n.Spec.Unschedulable, nil
}

// DrainResult is what a drain evicted and left.
type DrainResult struct {
	Evicted []string // namespace/name of each pod evicted
	Skipped []string // DaemonSet pods (they stay: their controller would recreate them on the node)
}

// Drain evicts the node's pods as talosctl v1.14 does
// (siderolabs/go-kubernetes kubernetes/nodedrain.Drain over kubectl's
// drain library): through the eviction API, so PodDisruptionBudgets are
// respected (a refused eviction is retried until the timeout); DaemonSet
// pods are skipped; each pod's own grace period; pods with emptyDir data
// and pods without a controller are evicted too. The node must be
// cordoned first. Bounded by opts.Timeout.
func (a *Access) Drain(ctx context.Context, name string, opts DrainOptions) (*DrainResult, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultDrainTimeout
	}
	if opts.EvictRetryDelay <= 0 {
		opts.EvictRetryDelay = DefaultEvictRetryDelay
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	c, err := a.clientset()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	res := &DrainResult{}
	h := &drain.Helper{
		Ctx: dctx, Client: c, Force: true, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		Timeout: opts.Timeout, EvictErrorRetryDelay: opts.EvictRetryDelay, Out: io.Discard, ErrOut: io.Discard,
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, _ bool, err error) {
			id := printable.Bounded(pod.Namespace+"/"+pod.Name, 300)
			if err != nil {
				progress("failed to evict pod " + id + ": " + apiError(err))
				return
			}
			res.Evicted = append(res.Evicted, id)
			progress("evicted pod " + id)
		},
	}
	list, errs := h.GetPodsForDeletion(name)
	if len(errs) > 0 {
		return res, fmt.Errorf("drain %s: %s", printable.String(name), apiError(errors.Join(errs...)))
	}
	for _, p := range list.Pods() {
		progress("evicting pod " + printable.Bounded(p.Namespace+"/"+p.Name, 300))
	}
	// What the filters kept on the node (DaemonSet pods): all its pods
	// but those to evict.
	evict := map[string]bool{}
	for _, p := range list.Pods() {
		evict[p.Namespace+"/"+p.Name] = true
	}
	all, err := c.CoreV1().Pods(metav1.NamespaceAll).List(dctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return res, fmt.Errorf("drain %s: list its pods: %s", printable.String(name), apiError(err))
	}
	for _, p := range all.Items {
		if id := p.Namespace + "/" + p.Name; !evict[id] {
			res.Skipped = append(res.Skipped, printable.Bounded(id, 300))
		}
	}
	if err := h.DeleteOrEvictPods(list.Pods()); err != nil {
		if ctx.Err() == nil && (dctx.Err() != nil || strings.Contains(err.Error(), "deadline") || strings.Contains(err.Error(), "global timeout")) {
			return res, fmt.Errorf("drain %s: not drained within %s (a PodDisruptionBudget refuses the evictions?): %s", printable.String(name), opts.Timeout, apiError(err))
		}
		return res, fmt.Errorf("drain %s: %s", printable.String(name), apiError(err))
	}
	return res, nil
}

// WaitReady waits until the node's Ready condition is True (bounded by ctx).
func (a *Access) WaitReady(ctx context.Context, name string, every time.Duration) error {
	c, err := a.clientset()
	if err != nil {
		return err
	}
	for {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && nodeOf(*n).Ready == "True" {
			return nil
		}
		select {
		case <-ctx.Done():
			why := "not Ready"
			if err != nil {
				why = apiError(err)
			}
			return fmt.Errorf("the Kubernetes node %s: %s: %w", printable.String(name), why, ctx.Err())
		case <-time.After(every):
		}
	}
}

// apiError is an API error made printable and bounded (the server's words).
func apiError(err error) string { return printable.Bounded(oneLine(err.Error()), 512) }
