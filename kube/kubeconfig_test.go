package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// talosKubeconfig is what Talos generates (pkg/kubeconfig/generate.go).
func talosKubeconfig(server, key string) *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters["homelab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("ca")}
	c.AuthInfos["admin@homelab"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("crt"), ClientKeyData: []byte(key)}
	c.Contexts["admin@homelab"] = &clientcmdapi.Context{Cluster: "homelab", AuthInfo: "admin@homelab", Namespace: "default"}
	c.CurrentContext = "admin@homelab"
	return c
}

func TestMerge(t *testing.T) {
	// Into an empty file: as is.
	dst := clientcmdapi.NewConfig()
	if r := Merge(dst, talosKubeconfig("https://a:6443", "k1"), false); r.Context != "admin@homelab" || len(r.Renamed) != 0 || dst.CurrentContext != "admin@homelab" {
		t.Fatalf("empty: %+v", r)
	}
	// The same again: reused, nothing renamed.
	if r := Merge(dst, talosKubeconfig("https://a:6443", "k1"), false); len(r.Renamed) != 0 || len(dst.Clusters) != 1 {
		t.Fatalf("same: %+v", r)
	}
	// A new client key (each fetch makes one): the user differs and is
	// renamed, and the context with it; the equal cluster is reused.
	r := Merge(dst, talosKubeconfig("https://a:6443", "k2"), false)
	if r.Context != "admin@homelab-1" || dst.Contexts["admin@homelab-1"].AuthInfo != "admin@homelab-1" || dst.Contexts["admin@homelab-1"].Cluster != "homelab" {
		t.Fatalf("new key: %+v %v", r, dst.Contexts)
	}
	// Another cluster of that name: every name follows the cluster's.
	r = Merge(dst, talosKubeconfig("https://b:6443", "k3"), false)
	if r.Context != "admin@homelab-1-1" { // the user admin@homelab-1 is taken by the k2 merge
		t.Fatalf("other cluster: context %s, renames %+v", r.Context, r.Renamed)
	}
	if dst.Clusters["homelab-1"] == nil || dst.Clusters["homelab-1"].Server != "https://b:6443" || dst.Contexts[r.Context].Cluster != "homelab-1" {
		t.Fatalf("other cluster: %+v clusters %v", r, dst.Clusters)
	}
	// --force: replaced under the same names.
	r = Merge(dst, talosKubeconfig("https://c:6443", "k4"), true)
	if r.Context != "admin@homelab" || dst.Clusters["homelab"].Server != "https://c:6443" || len(r.Overwritten) != 2 {
		t.Fatalf("force: %+v", r)
	}
}

// WriteFile writes 0600 through a symlink to its target, atomically.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, talosKubeconfig("https://a:6443", "k")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	fi, err := os.Stat(real)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	got, err := clientcmd.LoadFromFile(real)
	if err != nil || got.CurrentContext != "admin@homelab" {
		t.Fatalf("%v %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left behind: %v", entries)
	}
	// A broken file is named without quoting it.
	if _, err := Parse([]byte("apiVersion: v1\nclusters: [secret-value: {")); err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("parse error %v", err)
	}
}

func TestNoCNI(t *testing.T) {
	for msg, want := range map[string]bool{
		"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized":      true,
		"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized": true,
		"kubelet is posting ready status":                          false,
		"container runtime not ready: RuntimeReady=false reason:x": false,
	} {
		if NoCNI(msg) != want {
			t.Errorf("NoCNI(%q) = %v", msg, !want)
		}
	}
}
