package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

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
