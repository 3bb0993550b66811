package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"

	"github.com/talosflash/talosflash/internal/printable"
)

// The drain here is kubectl's drain library (k8s.io/kubectl pkg/drain,
// v0.37.2) as talosctl v1.14 runs it (siderolabs/go-kubernetes
// kubernetes/nodedrain: Force, IgnoreAllDaemonSets, DeleteEmptyDirData,
// GracePeriodSeconds -1), written over the REST client: that library
// brings the whole clientset and kubectl's command packages (~19 MiB
// resident in every run, docs/PERFORMANCE.md). Each step names the
// function of kubectl's whose behaviour it keeps.

// Drain defaults: talosctl v1.14's (cmd/talosctl/pkg/talos/nodedrain:
// DefaultDrainTimeout 5 min) and kubectl drain's retry of an eviction a
// PodDisruptionBudget refuses (k8s.io/kubectl pkg/cmd/drain: 5 s).
const (
	DefaultDrainTimeout    = 5 * time.Minute
	DefaultEvictRetryDelay = 5 * time.Second
)

// waitDeleteEvery is how often a drain checks that an evicted pod is gone
// (kubectl pkg/drain/drain.go evictPods: waitForDelete's interval).
const waitDeleteEvery = time.Second

// DrainOptions bound a drain.
type DrainOptions struct {
	Timeout         time.Duration // the whole eviction; default DefaultDrainTimeout
	EvictRetryDelay time.Duration // after a refused eviction (429: a PodDisruptionBudget); default DefaultEvictRetryDelay
	// Progress gets a line per pod evicted (or failing to be).
	Progress func(string)
}

// ErrNodeNotFound: no Kubernetes node of that name.
var ErrNodeNotFound = errors.New("no such Kubernetes node")

// Cordon marks the node unschedulable (kubectl's drain.RunCordonOrUncordon,
// as talosctl v1.14's nodedrain.Cordon).
func (a *Access) Cordon(ctx context.Context, name string) error { return a.cordon(ctx, name, true) }

// Uncordon marks it schedulable again; a node that no longer exists is no error.
func (a *Access) Uncordon(ctx context.Context, name string) error { return a.cordon(ctx, name, false) }

// cordonPatch and uncordonPatch are the strategic merge patches kubectl's
// CordonHelper computes (pkg/drain/cordon.go PatchOrReplaceWithContext:
// the two-way merge patch of the node with and without
// spec.unschedulable, which is omitempty: false removes it).
var (
	cordonPatch   = []byte(`{"spec":{"unschedulable":true}}`)
	uncordonPatch = []byte(`{"spec":{"unschedulable":null}}`)
)

func (a *Access) cordon(ctx context.Context, name string, on bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	verb, patch := "cordon", cordonPatch
	if !on {
		verb, patch = "uncordon", uncordonPatch
	}
	n, err := getNode(ctx, c, name)
	if apierrors.IsNotFound(err) {
		if !on {
			return nil
		}
		return fmt.Errorf("%s %s: %w", verb, printable.String(name), ErrNodeNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %s", verb, printable.String(name), apiError(err))
	}
	if n.Spec.Unschedulable == on { // CordonHelper.UpdateIfRequired
		return nil
	}
	if err := c.Patch(types.StrategicMergePatchType).Resource("nodes").Name(name).Body(patch).Do(ctx).Error(); err != nil {
		// kubectl's words, for either verb (RunCordonOrUncordon).
		return fmt.Errorf("%s %s: %s", verb, printable.String(name), apiError(fmt.Errorf("cordon error: %w", err)))
	}
	return nil
}

// DrainResult is what a drain evicted and left.
type DrainResult struct {
	Evicted []string // namespace/name of each pod evicted
	Skipped []string // DaemonSet pods (they stay: their controller would recreate them on the node) and mirror pods
}

// Drain evicts the node's pods as talosctl v1.14 does
// (siderolabs/go-kubernetes kubernetes/nodedrain.Drain over kubectl's
// drain library): through the eviction API, so PodDisruptionBudgets are
// respected (a refused eviction is retried until the timeout); DaemonSet
// pods and mirror pods (the kubelet's static pods) are skipped; each
// pod's own grace period; pods with emptyDir data and pods without a
// controller are evicted too. The node must be cordoned first. Bounded
// by opts.Timeout.
func (a *Access) Drain(ctx context.Context, name string, opts DrainOptions) (*DrainResult, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultDrainTimeout
	}
	if opts.EvictRetryDelay <= 0 {
		opts.EvictRetryDelay = DefaultEvictRetryDelay
	}
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	d := &drainer{c: c, opts: opts, res: &DrainResult{}}
	evict, err := d.podsToEvict(dctx, name)
	if err != nil {
		return d.res, fmt.Errorf("drain %s: %s", printable.String(name), apiError(err))
	}
	for _, p := range evict {
		d.progress("evicting pod " + printable.Bounded(p.Namespace+"/"+p.Name, 300))
	}
	if err := d.evictPods(dctx, evict); err != nil {
		if ctx.Err() == nil && (dctx.Err() != nil || strings.Contains(err.Error(), "deadline") || strings.Contains(err.Error(), "global timeout")) {
			return d.res, fmt.Errorf("drain %s: not drained within %s (a PodDisruptionBudget refuses the evictions?): %s", printable.String(name), opts.Timeout, apiError(err))
		}
		return d.res, fmt.Errorf("drain %s: %s", printable.String(name), apiError(err))
	}
	return d.res, nil
}

// drainer is one Drain: its pods' goroutines report through it.
type drainer struct {
	c    *rest.RESTClient
	opts DrainOptions
	mu   sync.Mutex // res and Progress
	res  *DrainResult
}

func (d *drainer) progress(line string) {
	if d.opts.Progress != nil {
		d.opts.Progress(line)
	}
}

// finished is OnPodDeletionOrEvictionFinished's: a pod gone, or the wait
// for it failing.
func (d *drainer) finished(p *corev1.Pod, err error) {
	id := printable.Bounded(p.Namespace+"/"+p.Name, 300)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.progress("failed to evict pod " + id + ": " + apiError(err))
		return
	}
	d.res.Evicted = append(d.res.Evicted, id)
	d.progress("evicted pod " + id)
}

// podsToEvict lists the node's pods (kubectl GetPodsForDeletion: across
// namespaces, fieldSelector spec.nodeName) and sorts them with kubectl's
// filters under talosctl's flags: the pods kept go to res.Skipped; a pod
// a filter cannot decide is an error ("cannot delete ...: ns/pod").
func (d *drainer) podsToEvict(ctx context.Context, node string) ([]corev1.Pod, error) {
	selector := "spec.nodeName=" + node
	list := &corev1.PodList{}
	if err := d.c.Get().Resource("pods").Param("fieldSelector", selector).Do(ctx).Into(list); err != nil {
		return nil, enhanceListError(err, selector)
	}
	var evict []corev1.Pod
	var skipped []string
	failed := map[string][]string{} // error message: pods (PodDeleteList.errors)
	var order []string
	for _, p := range list.Items {
		id := p.Namespace + "/" + p.Name
		keep, err := d.keep(ctx, &p)
		switch {
		case err != nil:
			msg := err.Error()
			if _, ok := failed[msg]; !ok {
				order = append(order, msg)
			}
			failed[msg] = append(failed[msg], id)
		case keep:
			skipped = append(skipped, printable.Bounded(id, 300))
		default:
			evict = append(evict, p)
		}
	}
	if len(order) > 0 {
		errs := make([]error, 0, len(order))
		for _, msg := range order {
			errs = append(errs, fmt.Errorf("cannot delete %s: %s", msg, strings.Join(failed[msg], ", ")))
		}
		return nil, errors.Join(errs...)
	}
	d.res.Skipped = skipped
	return evict, nil
}

// keep is kubectl's filters (pkg/drain/filters.go makeFilters) with
// Force, IgnoreAllDaemonSets and DeleteEmptyDirData: a running pod of a
// DaemonSet that exists stays (daemonSetFilter: one whose DaemonSet is
// gone is evicted), so does a mirror pod (mirrorPodFilter); pods with
// emptyDir volumes (localStorageFilter) and pods without a controller
// (unreplicatedFilter) are evicted. An error is the DaemonSet's lookup
// failing.
func (d *drainer) keep(ctx context.Context, p *corev1.Pod) (bool, error) {
	done := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" && ref.APIVersion == "apps/v1" && !done {
		err := d.c.Get().AbsPath("/apis/apps/v1", "namespaces", p.Namespace, "daemonsets", ref.Name).Do(ctx).Error()
		switch {
		case err == nil:
			return true, nil
		case !apierrors.IsNotFound(err):
			return false, err
		}
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true, nil
	}
	return false, nil
}

// enhanceListError is cli-runtime's resource.EnhanceListError as kubectl's
// drain calls it for the pod list: a 400 or 404 names what was listed.
func enhanceListError(err error, fieldSelector string) error {
	var se *apierrors.StatusError
	if (apierrors.IsBadRequest(err) || apierrors.IsNotFound(err)) && errors.As(err, &se) {
		se.ErrStatus.Message = fmt.Sprintf("Unable to find %q that match label selector %q, field selector %q: %v",
			corev1.SchemeGroupVersion.WithResource("pods").String(), "", fieldSelector, se.ErrStatus.Message)
		return se
	}
	return err
}

// evictPods is kubectl's DeleteOrEvictPods with eviction: the server must
// offer policy/v1 pods/eviction (CheckEvictionSupport's discovery of
// /api/v1; every Kubernetes Talos runs does), then each pod is
// evicted and waited for in its own goroutine, all bounded by ctx.
func (d *drainer) evictPods(ctx context.Context, pods []corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	if err := d.checkEviction(ctx); err != nil {
		return err
	}
	errc := make(chan error, len(pods))
	for _, p := range pods {
		go func() { errc <- d.evictPod(ctx, p) }()
	}
	var errs []error
	for range pods {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// checkEviction is CheckEvictionSupport: discovery of the core group
// lists pods/eviction with its group and version. kubectl falls back to
// policy/v1beta1 (Kubernetes before 1.22) or to deleting the pods
// (before 1.8, no budgets): neither is a cluster Talos runs (v1.13 needs
// Kubernetes 1.31: machinery compatibility/talos113
// MinimumKubernetesVersion), and a drain that ignores budgets is refused
// here instead.
func (d *drainer) checkEviction(ctx context.Context) error {
	list := &metav1.APIResourceList{}
	if err := d.c.Get().AbsPath("/api/v1").Do(ctx).Into(list); err != nil {
		return err
	}
	for _, r := range list.APIResources {
		if r.Name == "pods/eviction" && r.Kind == "Eviction" && r.Group != "" && r.Version != "" {
			if gv := (r.Group + "/" + r.Version); gv != policyv1.SchemeGroupVersion.String() {
				return fmt.Errorf("the API server evicts pods with %s, not %s (Kubernetes older than 1.22?)", printable.Bounded(gv, 64), policyv1.SchemeGroupVersion)
			}
			return nil
		}
	}
	return errors.New("the API server offers no pod eviction (pods/eviction): a drain would ignore PodDisruptionBudgets")
}

// evictPod is one pod's goroutine of kubectl's evictPods: the eviction,
// retried after EvictRetryDelay while a budget refuses it (429) or its
// namespace is terminating, then the wait until the pod is gone. A pod
// already gone (404) is done without a word, as in kubectl.
func (d *drainer) evictPod(ctx context.Context, pod corev1.Pod) error {
	active := pod
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("error when evicting pods/%q -n %q: global timeout reached: %v", active.Name, active.Namespace, d.opts.Timeout)
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: active.Name, Namespace: active.Namespace},
			DeleteOptions: &metav1.DeleteOptions{}} // GracePeriodSeconds unset: the pod's own
		err := d.c.Post().AbsPath("/api/v1").Namespace(active.Namespace).Resource("pods").Name(active.Name).SubResource("eviction").Body(ev).Do(ctx).Error()
		terminating := apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
		switch {
		case err == nil, terminating && !active.DeletionTimestamp.IsZero():
			// Evicted, or being deleted with its namespace: wait for it.
			return d.waitGone(ctx, pod, active)
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsTooManyRequests(err), terminating:
			select {
			case <-ctx.Done():
			case <-time.After(d.opts.EvictRetryDelay):
			}
		default:
			return fmt.Errorf("error when evicting pods/%q -n %q: %v", active.Name, active.Namespace, err)
		}
		// Errors ignored: the eviction sorts it out with the pod as it was.
		if fresh, err := getPod(ctx, d.c, active.Namespace, active.Name); err == nil {
			active = *fresh
		}
	}
}

// waitGone is kubectl's waitForDelete for one pod: checked at once, then
// every second, until it is gone (404, or another pod of that name: a new
// UID), bounded by ctx. A failing check ends the wait.
func (d *drainer) waitGone(ctx context.Context, pod, active corev1.Pod) error {
	t := time.NewTicker(waitDeleteEvery)
	defer t.Stop()
	for {
		p, err := getPod(ctx, d.c, active.Namespace, active.Name)
		switch {
		case apierrors.IsNotFound(err) || err == nil && p.UID != active.UID:
			d.finished(&active, nil)
			return nil
		case err != nil:
			d.finished(&active, err)
			return fmt.Errorf("error when waiting for pod %q in namespace %q to terminate: %v", pod.Name, pod.Namespace, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("error when waiting for pod %q in namespace %q to terminate: %v", pod.Name, pod.Namespace, ctx.Err())
		case <-t.C:
		}
	}
}

// WaitReady waits until the node's Ready condition is True (bounded by ctx).
func (a *Access) WaitReady(ctx context.Context, name string, every time.Duration) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	for {
		n, err := getNode(ctx, c, name)
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
