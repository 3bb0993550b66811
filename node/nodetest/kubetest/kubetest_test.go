package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// testCA is a throw-away Kubernetes CA (PEM).
func testCA(t *testing.T) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"kubernetes"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

func clientFor(t *testing.T, s *Server, ca, caKey []byte, groups []string) *kubernetes.Clientset {
	t.Helper()
	crt, key, err := ClientCert(ca, caKey, "admin", groups, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL(), Timeout: 5 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: crt, KeyData: key}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// client-go's typed client lists, gets and watches the nodes: NotReady with
// the kubelet's CNI message until the CNI is installed, then Ready (a
// MODIFIED event), the not-ready taint gone; a missing node is NotFound.
func TestTypedClientListGetWatch(t *testing.T) {
	ca, caKey := testCA(t)
	s, err := New(Options{CACert: ca, CAKey: caKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.RegisterNode("cp-1", "127.0.0.21", true)
	s.RegisterNode("worker-1", "127.0.0.22", false)
	c := clientFor(t, s, ca, caKey, []string{AdminGroup})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "cp-1" || list.ResourceVersion == "" {
		t.Fatalf("list: %+v", list.Items)
	}
	for _, n := range list.Items {
		r := ready(n)
		if r.Status != corev1.ConditionFalse || r.Reason != ReasonNotReady || r.Message != MessageNoCNI {
			t.Errorf("%s Ready %+v", n.Name, r)
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "node.kubernetes.io/not-ready" {
			t.Errorf("%s taints %v", n.Name, n.Spec.Taints)
		}
	}
	if _, ok := list.Items[0].Labels[controlPlaneKey]; !ok {
		t.Errorf("cp-1 labels %v", list.Items[0].Labels)
	}
	one, err := c.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil || one.Status.Addresses[0].Address != "127.0.0.22" {
		t.Fatalf("get: %v %+v", err, one)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("missing node: %v", err)
	}

	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.name=worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s.InstallCNI()
	select {
	case ev := <-w.ResultChan():
		n, ok := ev.Object.(*corev1.Node)
		if ev.Type != watch.Modified || !ok || n.Name != "worker-1" || ready(*n).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
			t.Fatalf("event %s %+v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event after the CNI was installed")
	}
	if r, reg := s.NodeReady("cp-1"); !r || !reg {
		t.Fatal("cp-1 not ready after the CNI")
	}

	// A watch from no resourceVersion starts with what exists.
	w2, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	for _, want := range []string{"cp-1", "worker-1"} {
		ev := <-w2.ResultChan()
		if n, ok := ev.Object.(*corev1.Node); ev.Type != watch.Added || !ok || n.Name != want {
			t.Fatalf("initial event %s %v", ev.Type, ev.Object)
		}
	}
	s.RegisterNode("worker-2", "127.0.0.23", false) // after the CNI: Ready at once
	if ev := <-w2.ResultChan(); ev.Type != watch.Added || ready(*ev.Object.(*corev1.Node)).Status != corev1.ConditionTrue {
		t.Fatalf("late node: %s %v", ev.Type, ev.Object)
	}
}

// Only the cluster's admins: another group is 403, no certificate 401.
func TestAuthentication(t *testing.T) {
	ca, caKey := testCA(t)
	s, err := New(Options{CACert: ca, CAKey: caKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	_, err = clientFor(t, s, ca, caKey, []string{"developers"}).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("non-admin: %v", err)
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL(), Timeout: 5 * time.Second, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("anonymous: %v", err)
	}
	if _, err := New(Options{Addr: "192.0.2.1:0", CACert: ca, CAKey: caKey}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("non-loopback address: %v", err)
	}
}

func ready(n corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}
