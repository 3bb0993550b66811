package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// liveCluster is cp-1 and worker-1 fakes at cpIP and workerIP, configured
// and bootstrapped through `apply --inventory --talosconfig --bootstrap`;
// the configs name endpoint (its port: the cluster's API).
type liveCluster struct {
	inv, tc, port string
	frags         []string
	cp, w         *nodetest.Server
}

func startCluster(t *testing.T, cpIP, workerIP, endpoint string) *liveCluster {
	t.Helper()
	inv, tc, frags := clusterInventory(t, cpIP, workerIP, endpoint, "worker")
	port := strconv.Itoa(testkit.FreePort(t, cpIP))
	c := &liveCluster{inv: inv, tc: tc, port: port, frags: frags,
		cp: nodetest.Start(t, nodetest.Options{Addr: cpIP + ":" + port, Hostname: "cp-1", Schematic: builtinSchematic(t, "controlplane"), BootConfig: true}),
		w:  nodetest.Start(t, nodetest.Options{Addr: workerIP + ":" + port, Hostname: "worker-1", Schematic: builtinSchematic(t, "worker"), BootConfig: true}),
	}
	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "20s", "--talosconfig", tc, "--bootstrap", "--interval", "50ms")
	if code != contract.ExitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if c.cp.Node() == nil || c.cp.Node().KubeAPI() == nil {
		t.Fatalf("no Kubernetes API after the bootstrap:\n%s", stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.cp.Node().KubeAPI().WaitNodes(ctx, 2); err != nil {
		t.Fatal(err)
	}
	return c
}

// kubeconfigSecrets are the fragments of a kubeconfig file's keys.
func kubeconfigSecrets(t *testing.T, path string) []string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, u := range cfg.AuthInfos {
		for _, b := range [][]byte{u.ClientKeyData, u.ClientCertificateData} {
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(l, "-----") && l != "" {
					secrets = append(secrets, l)
				}
			}
		}
	}
	if len(secrets) == 0 {
		t.Fatal("kubeconfig without client keys")
	}
	return nodetest.Fragments(secrets...)
}

// nodesThrough lists the nodes with client-go through a kubeconfig file.
func nodesThrough(t *testing.T, path string) []string {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	list, err := k.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("client-go through %s: %v", path, err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names
}

// `talosflash kubeconfig` merges the admin kubeconfig into
// ~/.kube/config as talosctl does: a different cluster already named
// homelab is kept and the new entries renamed homelab-1/admin@homelab-1,
// the new context current, the file 0600; client-go reaches the cluster
// through it; --force replaces instead; FILE writes a new file; a worker
// refuses. No key on any output.
func TestKubeconfigCommand(t *testing.T) {
	kport := strconv.Itoa(testkit.FreePort(t, "127.0.0.61"))
	c := startCluster(t, "127.0.0.61", "127.0.0.62", "https://127.0.0.61:"+kport)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	path := filepath.Join(home, ".kube", "config")
	old := clientcmdapi.NewConfig()
	old.Clusters["homelab"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443"}
	old.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "t0k3n"}
	old.Contexts["work"] = &clientcmdapi.Context{Cluster: "homelab", AuthInfo: "me"}
	old.CurrentContext = "work"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*old, path); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := cliRun(t, "kubeconfig", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ans := answerMap(t, stdout, "kubeconfig")
	if ans["path"] != path || ans["merged"] != true || ans["context"] != "admin@homelab-1" || ans["server_choice"] != "control-plane" ||
		ans["server"] != "https://127.0.0.61:"+kport {
		t.Fatalf("answer %v", ans)
	}
	if !strings.Contains(stderr, `renamed cluster "homelab" -> "homelab-1"`) {
		t.Errorf("stderr: %s", stderr)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", st, err)
	}
	got, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != "admin@homelab-1" || got.Clusters["homelab"].Server != "https://10.0.0.1:6443" || got.Contexts["work"] == nil ||
		got.Contexts["admin@homelab-1"].Cluster != "homelab-1" || got.Contexts["admin@homelab-1"].AuthInfo != "admin@homelab-1" {
		t.Fatalf("merged: current %s, clusters %v, contexts %v", got.CurrentContext, got.Clusters, got.Contexts)
	}
	if names := nodesThrough(t, path); strings.Join(names, ",") != "cp-1,worker-1" {
		t.Fatalf("nodes %v", names)
	}
	secrets := append(kubeconfigSecrets(t, path), c.frags...)
	assertNoFragments(t, secrets, stdout, stderr)
	assertNoPEM(t, stdout, stderr)

	// --force: the same names again, replaced.
	code, stdout, stderr = cliRun(t, "kubeconfig", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, "--force")
	if code != contract.ExitOK || !strings.Contains(stdout, "replaced cluster homelab (--force)") || !strings.Contains(stdout, "context admin@homelab (current)") {
		t.Fatalf("--force: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got, _ := clientcmd.LoadFromFile(path); got.Clusters["homelab"].Server != "https://127.0.0.61:"+kport {
		t.Fatalf("--force kept the old cluster: %v", got.Clusters["homelab"])
	}

	// FILE: a new file, written 0600.
	file := filepath.Join(t.TempDir(), "sub", "kubeconfig")
	code, stdout, stderr = cliRun(t, "kubeconfig", "--node", c.cp.Addr(), "--talosconfig", c.tc, file)
	if code != contract.ExitOK || !strings.Contains(stdout, "wrote a new kubeconfig "+file) {
		t.Fatalf("FILE: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 || len(nodesThrough(t, file)) != 2 {
		t.Fatalf("FILE: %v %v", st, err)
	}
	assertNoFragments(t, append(kubeconfigSecrets(t, file), c.frags...), stdout, stderr)

	// A worker has no kubeconfig to give.
	code, _, stderr = cliRun(t, "kubeconfig", "--node", c.w.Addr(), "--talosconfig", c.tc, filepath.Join(t.TempDir(), "k"))
	if code != contract.ExitApply || !strings.Contains(stderr, "only available on control plane nodes") {
		t.Fatalf("worker: exit %d: %s", code, stderr)
	}
}

// A cluster endpoint that is no control plane's address and does not answer
// from here (a VIP not up yet): the kubeconfig points at the control plane
// asked, at the endpoint's port, and says so.
func TestKubeconfigReplacesAnUnreachableEndpoint(t *testing.T) {
	kport := strconv.Itoa(testkit.FreePort(t, "127.0.0.63"))
	c := startCluster(t, "127.0.0.63", "127.0.0.64", "https://127.0.0.69:"+kport)
	file := filepath.Join(t.TempDir(), "kubeconfig")
	code, stdout, stderr := cliRun(t, "kubeconfig", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, file, "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ans := answerMap(t, stdout, "kubeconfig")
	note, _ := ans["server_note"].(string)
	if ans["server_choice"] != "replaced" || ans["config_server"] != "https://127.0.0.69:"+kport || ans["server"] != "https://127.0.0.63:"+kport ||
		!strings.Contains(note, "an address of no control plane") || !strings.Contains(note, "(cp-1)") {
		t.Fatalf("answer %v", ans)
	}
	if len(nodesThrough(t, file)) != 2 {
		t.Fatal("client-go does not reach the cluster through the rewritten endpoint")
	}
}

// answerMap is the answer line of event, decoded.
func answerMap(t *testing.T, stdout, event string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(answer(t, stdout, event), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
