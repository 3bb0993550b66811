package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talosflash/talosflash/node/nodetest/kubetest"
)

func drainAPI(t *testing.T) (*kubetest.Server, *Access) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	ca, caKey := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
	api, err := kubetest.New(kubetest.Options{CACert: ca, CAKey: caKey, CNIInstalled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	crt, key, err := kubetest.ClientCert(ca, caKey, "admin", []string{kubetest.AdminGroup}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"cp-1", "worker-1", "worker-2"} {
		api.RegisterNode(n, "127.0.0."+string(rune('1'+i)), i == 0)
	}
	return api, &Access{Server: api.URL(), Context: "admin@test", rest: &rest.Config{Host: api.URL(), Timeout: 5 * time.Second, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: crt, KeyData: key}}}
}

// A drain as talosctl's: cordoned first, the Deployment's pods evicted
// through the eviction API within their budget (recreated elsewhere), the
// DaemonSet's pod left; uncordon makes the node schedulable again.
func TestCordonDrainUncordon(t *testing.T) {
	api, a := drainAPI(t)
	api.AddDeployment("default", "web", 3, 1)
	api.AddDaemonSet("kube-system", "kube-flannel")
	ctx := context.Background()
	if err := a.Cordon(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if !api.Unschedulable("worker-1") || api.Unschedulable("worker-2") {
		t.Fatal("cordon did not reach the node")
	}
	var lines []string
	res, err := a.Drain(ctx, "worker-1", DrainOptions{Timeout: 5 * time.Second, EvictRetryDelay: 20 * time.Millisecond, Progress: func(s string) { lines = append(lines, s) }})
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, strings.Join(lines, "\n"))
	}
	ev := api.Evictions()
	if len(ev) != 1 || !strings.HasSuffix(ev[0], "@worker-1") || !strings.HasPrefix(ev[0], "default/web-") || len(res.Evicted) != 1 {
		t.Fatalf("evictions %v, result %+v", ev, res)
	}
	if left := api.PodsOn("worker-1"); !slices.Equal(left, []string{"kube-system/kube-flannel-worker-1"}) || !slices.Equal(res.Skipped, left) {
		t.Fatalf("left on worker-1: %v, skipped %v", left, res.Skipped)
	}
	if err := a.Uncordon(ctx, "worker-1"); err != nil || api.Unschedulable("worker-1") {
		t.Fatalf("uncordon: %v", err)
	}
	if err := a.WaitReady(ctx, "worker-1", time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// A budget that allows no disruption holds the drain: every eviction is
// refused (429) until the bound, and the error says why.
func TestDrainRespectsBudgetAndIsBounded(t *testing.T) {
	api, a := drainAPI(t)
	api.AddDeployment("default", "db", 1, 0)
	api.AddMinAvailableBudget("default", "db", 1)
	ctx := context.Background()
	if err := a.Cordon(ctx, "cp-1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := a.Drain(ctx, "cp-1", DrainOptions{Timeout: 300 * time.Millisecond, EvictRetryDelay: 20 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "not drained within 300ms") || time.Since(start) > 5*time.Second {
		t.Fatalf("drain against a budget: %v after %s", err, time.Since(start))
	}
	if len(api.Evictions()) != 0 || len(api.RefusedEvictions()) == 0 || len(api.PodsOn("cp-1")) != 1 {
		t.Fatalf("evicted %v refused %v left %v", api.Evictions(), api.RefusedEvictions(), api.PodsOn("cp-1"))
	}
}

// kubectl's filters under talosctl's flags (pkg/drain/filters.go): a
// running pod of a DaemonSet that exists stays, so does a mirror pod;
// pods without a controller, with emptyDir data, of a DaemonSet that is
// gone, and finished pods of a DaemonSet are evicted. Each pod evicted is
// said before and after.
func TestDrainFilters(t *testing.T) {
	api, a := drainAPI(t)
	api.AddDaemonSet("kube-system", "kube-flannel")
	ds := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, Controller: ptr(true)}}
	}
	on := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	bare := corev1.Pod{ObjectMeta: on("default", "bare"), Spec: corev1.PodSpec{NodeName: "worker-1",
		Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	mirror := corev1.Pod{ObjectMeta: on("kube-system", "static-web-worker-1"), Spec: corev1.PodSpec{NodeName: "worker-1"}}
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "1f2e"}
	orphan := corev1.Pod{ObjectMeta: on("default", "orphan"), Spec: corev1.PodSpec{NodeName: "worker-1"}}
	orphan.OwnerReferences = ds("gone")
	done := corev1.Pod{ObjectMeta: on("kube-system", "kube-flannel-done"), Spec: corev1.PodSpec{NodeName: "worker-1"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	done.OwnerReferences = ds("kube-flannel")
	elsewhere := corev1.Pod{ObjectMeta: on("default", "elsewhere"), Spec: corev1.PodSpec{NodeName: "worker-2"}}
	for _, p := range []corev1.Pod{bare, mirror, orphan, done, elsewhere} {
		api.AddPod(p)
	}
	ctx := context.Background()
	if err := a.Cordon(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	res, err := a.Drain(ctx, "worker-1", DrainOptions{Timeout: 5 * time.Second, EvictRetryDelay: 20 * time.Millisecond, Progress: func(s string) { lines = append(lines, s) }})
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, strings.Join(lines, "\n"))
	}
	evicted := []string{"default/bare", "default/orphan", "kube-system/kube-flannel-done"}
	ev := api.Evictions()
	slices.Sort(ev)
	if want := []string{"default/bare@worker-1", "default/orphan@worker-1", "kube-system/kube-flannel-done@worker-1"}; !slices.Equal(ev, want) {
		t.Fatalf("evictions %v, want %v", ev, want)
	}
	if slices.Sort(res.Evicted); !slices.Equal(res.Evicted, evicted) {
		t.Fatalf("result evicted %v", res.Evicted)
	}
	left := []string{"kube-system/kube-flannel-worker-1", "kube-system/static-web-worker-1"}
	if got := api.PodsOn("worker-1"); !slices.Equal(got, left) || !slices.Equal(res.Skipped, left) {
		t.Fatalf("left on worker-1: %v, skipped %v", got, res.Skipped)
	}
	if !slices.Equal(lines[:3], []string{"evicting pod default/bare", "evicting pod default/orphan", "evicting pod kube-system/kube-flannel-done"}) || len(lines) != 6 {
		t.Fatalf("progress:\n%s", strings.Join(lines, "\n"))
	}
	for _, id := range evicted {
		if !slices.Contains(lines[3:], "evicted pod "+id) {
			t.Fatalf("no line for %s:\n%s", id, strings.Join(lines, "\n"))
		}
	}
	// Nothing left to evict: no eviction, no discovery; the node stays
	// cordoned until uncordoned (twice is no error; nor is a node gone).
	before := len(api.Requests())
	if res, err := a.Drain(ctx, "worker-1", DrainOptions{Timeout: 5 * time.Second}); err != nil || len(res.Evicted) != 0 || len(res.Skipped) != 2 {
		t.Fatalf("second drain: %+v %v", res, err)
	}
	if reqs := api.Requests()[before:]; len(reqs) != 2 || !strings.HasPrefix(reqs[0], "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dworker-1") {
		t.Fatalf("second drain sent %v", reqs)
	}
	for range 2 {
		if err := a.Uncordon(ctx, "worker-1"); err != nil || api.Unschedulable("worker-1") {
			t.Fatalf("uncordon: %v", err)
		}
	}
	if err := a.Uncordon(ctx, "worker-9"); err != nil {
		t.Fatalf("uncordon of a node gone: %v", err)
	}
	if err := a.Cordon(ctx, "worker-9"); !errors.Is(err, ErrNodeNotFound) {
		t.Fatalf("cordon of a node gone: %v", err)
	}
}

// A server whose discovery offers no policy/v1 eviction (Kubernetes
// before 1.22: policy/v1beta1; before 1.8: none) is refused before any
// eviction: kubectl would fall back to v1beta1, or to deleting the pods
// past their budgets; Talos v1.14 runs neither.
func TestDrainNeedsPolicyV1Eviction(t *testing.T) {
	for gv, want := range map[string]string{
		"policy/v1beta1": "evicts pods with policy/v1beta1, not policy/v1",
		"":               "offers no pod eviction (pods/eviction): a drain would ignore PodDisruptionBudgets",
	} {
		api, a := drainAPI(t)
		api.AddDeployment("default", "web", 3, 1)
		api.SetEvictionDiscovery(gv)
		if err := a.Cordon(context.Background(), "worker-1"); err != nil {
			t.Fatal(err)
		}
		res, err := a.Drain(context.Background(), "worker-1", DrainOptions{Timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "drain worker-1: the API server "+want) || len(res.Evicted) != 0 {
			t.Fatalf("%q: %+v %v", gv, res, err)
		}
		if len(api.Evictions()) != 0 || len(api.PodsOn("worker-1")) != 1 {
			t.Fatalf("%q: evicted %v, left %v", gv, api.Evictions(), api.PodsOn("worker-1"))
		}
	}
}

func ptr[T any](v T) *T { return &v }
