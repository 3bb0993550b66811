package nodetest_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// freeTCPPort is a port free on ip now.
func freeTCPPort(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("%s: %v", ip, err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// machineStatus reads MachineStatus with the fixture's talosconfig.
func machineStatus(t *testing.T, addr string, tc []byte) (runtime.MachineStage, []runtime.UnmetCondition) {
	t.Helper()
	cfg, err := clientconfig.FromBytes(tc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.WithConfig(cfg), client.WithEndpoints(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, c.COSI, runtime.MachineStatusID)
	if err != nil {
		t.Fatalf("machine status of %s: %v", addr, err)
	}
	return ms.TypedSpec().Stage, ms.TypedSpec().Status.UnmetConditions
}

func unmetText(u []runtime.UnmetCondition) string {
	var parts []string
	for _, c := range u {
		parts = append(parts, c.Name+": "+c.Reason)
	}
	return strings.Join(parts, "; ")
}

// A configured fake lives its config's Kubernetes life: the control plane
// boots until its bootstrap (etcd waits to join), then runs and starts the
// cluster's API on its address at the endpoint's port; both kubelets
// register there, NotReady with the kubelet's CNI message (the user's
// config deletes KubeFlannelCNIConfig); Kubeconfig gives an admin
// kubeconfig client-go reaches the API with; once the test installs the
// CNI the nodes are Ready and MachineStatus is ready.
func TestConfiguredNodeLivesItsCluster(t *testing.T) {
	port := freeTCPPort(t, "127.0.0.41")
	ep := "https://127.0.0.41:" + port
	cpCfg := bytes.ReplaceAll(testkit.Testdata(t, "talos114/valid/controlplane.yaml"), []byte("https://192.168.1.20:6443"), []byte(ep))
	workerCfg := bytes.ReplaceAll(testkit.Testdata(t, "talos114/valid/worker.yaml"), []byte("https://192.168.1.20:6443"), []byte(ep))
	tc := testkit.Testdata(t, "talos114/valid/talosconfig")
	if bytes.Contains(cpCfg, []byte("kind: KubeFlannelCNIConfig")) {
		t.Fatal("fixture deploys Flannel; this test models the user's config without it")
	}
	tport := freeTCPPort(t, "127.0.0.41")
	cp := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "cp-1", Addr: "127.0.0.41:" + tport})
	worker := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "worker-1", Addr: "127.0.0.42:" + tport})
	apply(t, cp, cpCfg, "auto", false)
	apply(t, worker, workerCfg, "auto", false)
	cpNode, wNode := waitBooted(t, cp), waitBooted(t, worker)

	if stage, unmet := machineStatus(t, cp.Addr(), tc); stage != runtime.MachineStageBooting ||
		unmetText(unmet) != `services: etcd not running; nodeReady: node "cp-1" status is not available yet` {
		t.Fatalf("control plane before bootstrap: %s, %s", stage, unmetText(unmet))
	}
	if stage, unmet := machineStatus(t, worker.Addr(), tc); stage != runtime.MachineStageRunning ||
		unmetText(unmet) != `nodeReady: node "worker-1" status is not available yet` {
		t.Fatalf("worker before bootstrap: %s, %s", stage, unmetText(unmet))
	}
	if cpNode.KubeAPI() != nil {
		t.Fatal("a Kubernetes API before the bootstrap")
	}

	if _, err := fastBootstrap(t, cp.Addr(), tc); err != nil {
		t.Fatal(err)
	}
	api := cpNode.KubeAPI()
	if api == nil || api.Addr() != "127.0.0.41:"+port {
		t.Fatalf("no Kubernetes API at the endpoint after the bootstrap (%v)", api)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := api.WaitNodes(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if stage, unmet := machineStatus(t, cp.Addr(), tc); stage != runtime.MachineStageRunning || unmetText(unmet) != `nodeReady: node "cp-1" is not ready` {
		t.Fatalf("control plane after bootstrap: %s, %s", stage, unmetText(unmet))
	}

	// The admin kubeconfig: a worker refuses, the control plane answers.
	cfg, err := node.ParseTalosconfig(tc, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.FetchKubeconfig(ctx, worker.Addr(), cfg); err == nil || !strings.Contains(err.Error(), "only available on control plane nodes") {
		t.Fatalf("worker kubeconfig: %v", err)
	}
	kc, err := node.FetchKubeconfig(ctx, cp.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.CurrentContext != "admin@homelab" || loaded.Clusters["homelab"] == nil || loaded.Clusters["homelab"].Server != ep ||
		loaded.AuthInfos["admin@homelab"] == nil || loaded.Contexts["admin@homelab"].Namespace != "default" {
		t.Fatalf("kubeconfig: %+v", loaded)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*loaded, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	k, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := k.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Fatalf("%d nodes", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if r := readyOf(n); r.Status != corev1.ConditionFalse || !strings.Contains(r.Message, "cni plugin not initialized") {
			t.Errorf("%s: %+v", n.Name, r)
		}
	}

	api.InstallCNI()
	for _, addr := range []string{cp.Addr(), worker.Addr()} {
		if stage, unmet := machineStatus(t, addr, tc); stage != runtime.MachineStageRunning || len(unmet) != 0 {
			t.Fatalf("%s after the CNI: %s, %s", addr, stage, unmetText(unmet))
		}
	}
	if wNode.KubeAPI() != nil || cpNode.KubeconfigCalls() != 1 {
		t.Fatalf("worker API %v, %d kubeconfig calls", wNode.KubeAPI(), cpNode.KubeconfigCalls())
	}
}

// The incident through an apply: a worker booted from the Newt image and a
// config without its ExtensionServiceConfig boots forever, ext-newt
// waiting, and reboots at BootTimeout on its clock.
func TestConfiguredNodeWaitsForItsExtensionConfig(t *testing.T) {
	clock := nodetest.NewClock(0)
	tport := freeTCPPort(t, "127.0.0.43")
	sc := newtSchematic()
	w := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "worker-1", Addr: "127.0.0.43:" + tport, Schematic: sc,
		Clock: clock, BootTimeout: 10 * time.Minute})
	cp := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "cp-1", Addr: "127.0.0.44:" + tport})
	apply(t, cp, testkit.Testdata(t, "talos114/valid/controlplane.yaml"), "auto", false)
	apply(t, w, testkit.Testdata(t, "talos114/valid/worker.yaml"), "auto", false)
	wn := waitBooted(t, w)
	tc := testkit.Testdata(t, "talos114/valid/talosconfig")
	if stage, _ := machineStatus(t, w.Addr(), tc); stage != runtime.MachineStageBooting {
		t.Fatalf("stage %s, want booting", stage)
	}
	boot := wn.BootID()
	clock.Advance(10 * time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := wn.WaitReboots(ctx, 1); err != nil || wn.BootID() == boot {
		t.Fatalf("no reboot after BootTimeout: %v", err)
	}
}

func newtSchematic() *schematic.Schematic {
	sc := &schematic.Schematic{}
	sc.Customization.SystemExtensions.OfficialExtensions = []string{"siderolabs/newt"}
	return sc
}

func readyOf(n corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}
