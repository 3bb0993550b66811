package kubetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Workloads: what a drain meets on a node. Pods of a Deployment (its
// ReplicaSet recreates an evicted pod on another schedulable node at once),
// guarded by a PodDisruptionBudget, and a DaemonSet's pod on every node.
// See Behaviours for the sources.

func init() {
	Behaviours = append(Behaviours,
		Behaviour{"cordon: PATCH of the node (strategic merge patch of spec.unschedulable, as kubectl's CordonHelper sends it); uncordon sets it back",
			"k8s.io/kubectl pkg/drain/cordon.go (PatchOrReplace), kubernetes pkg/registry/core/node"},
		Behaviour{"pods listed across namespaces with fieldSelector spec.nodeName=NAME (the only pod field selector served here), got by namespace and name",
			"kubernetes pkg/registry/core/pod/strategy.go (GetAttrs, spec.nodeName), k8s.io/kubectl pkg/drain/drain.go (GetPodsForDeletion)"},
		Behaviour{"discovery of /api/v1 lists pods/eviction with group policy, version v1, kind Eviction (how a drain picks the eviction API); SetEvictionDiscovery: policy/v1beta1 (Kubernetes before 1.22) or none (before 1.8)",
			"k8s.io/kubectl pkg/drain/drain.go (CheckEvictionSupport), kubernetes pkg/registry/core/rest/storage_core.go"},
		Behaviour{"an eviction (POST pods/{name}/eviction, policy/v1) is refused 429 TooManyRequests \"Cannot evict pod as it would violate the pod's disruption budget.\" when a PodDisruptionBudget of the pod allows no disruption (healthy pods minus desired healthy, minAvailable or replicas minus maxUnavailable); else the pod is deleted",
			"kubernetes pkg/registry/core/pod/storage/eviction.go (checkAndDecrement, EvictionsRetry), pkg/controller/disruption/disruption.go (getExpectedPodCount, updatePdbStatus)"},
		Behaviour{"a Deployment's evicted pod is recreated by its ReplicaSet under a new name on a schedulable node (Running and Ready at once here); with none it stays Pending and unhealthy",
			"kubernetes pkg/controller/replicaset/replica_set.go (manageReplicas), pkg/scheduler (unschedulable nodes are filtered: plugins/nodeunschedulable)"},
		Behaviour{"Options.CoreDNS: Talos' CoreDNS Deployment (kube-system/coredns, 2 replicas, no PodDisruptionBudget) is scheduled once a CNI runs on a registered node",
			"siderolabs/talos internal/app/machined/pkg/controllers/k8s/manifest.go, templates (coredns), pkg/machinery/config/types/k8s/coredns.go"},
		Behaviour{"a DaemonSet's pod runs on every node and a drain leaves it (the DaemonSet is got to check it exists)",
			"kubernetes pkg/controller/daemon/daemon_controller.go, k8s.io/kubectl pkg/drain/filters.go (daemonSetFilter)"},
	)
	routes = append(routes,
		route{"PATCH /api/v1/nodes/{name}", (*Server).patchNode},
		route{"GET /api/v1", (*Server).discoveryV1},
		route{"GET /api/v1/pods", (*Server).listPods},
		route{"GET /api/v1/namespaces/{namespace}/pods/{name}", (*Server).getPod},
		route{"POST /api/v1/namespaces/{namespace}/pods/{name}/eviction", (*Server).evictPod},
		route{"GET /apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", (*Server).getDaemonSet},
	)
}

// workloads is the pod side of the store (under Server.mu).
type workloads struct {
	pods       map[string]*corev1.Pod // by namespace/name
	pdbs       []policyv1.PodDisruptionBudget
	daemonSets map[string]bool // namespace/name
	deploys    map[string]string
	evictions  []string // namespace/name on node, in order
	refused    []string // evictions refused by a budget
	serial     int
	// evictionGV is the group/version discovery gives pods/eviction
	// ("" for policy/v1; "-": no eviction, Kubernetes before 1.8).
	evictionGV string
}

func (s *Server) w() *workloads {
	if s.wl == nil {
		s.wl = &workloads{pods: map[string]*corev1.Pod{}, daemonSets: map[string]bool{}, deploys: map[string]string{}}
	}
	return s.wl
}

// AddDeployment runs replicas pods of a Deployment in namespace, spread
// over the schedulable nodes in name order, guarded by a
// PodDisruptionBudget of maxUnavailable when it is > 0.
func (s *Server) AddDeployment(namespace, name string, replicas, maxUnavailable int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.w()
	w.deploys[namespace+"/"+name] = name
	nodes := s.schedulable("")
	for i := range replicas {
		node := ""
		if len(nodes) > 0 {
			node = nodes[i%len(nodes)]
		}
		s.newPodLocked(namespace, name, node, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-6d4cf56db6", Controller: ptr(true)})
	}
	if maxUnavailable > 0 {
		mu := intstr.FromInt32(int32(maxUnavailable))
		w.pdbs = append(w.pdbs, policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}})
	}
	s.bumpLocked()
}

// seedLocked schedules Options.CoreDNS once a CNI runs on a registered
// node (the scheduler waits for a Ready node); once.
func (s *Server) seedLocked() {
	w := s.w()
	if !s.opts.CoreDNS || !s.cni || len(s.nodes) == 0 || w.deploys["kube-system/coredns"] != "" {
		return
	}
	w.deploys["kube-system/coredns"] = "coredns"
	nodes := s.schedulable("")
	if len(nodes) == 0 {
		return
	}
	for i := range 2 {
		s.newPodLocked("kube-system", "coredns", nodes[i%len(nodes)], metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "coredns-78d87fb69b", Controller: ptr(true)})
	}
}

// AddMinAvailableBudget guards the pods labelled app=name with minAvailable.
func (s *Server) AddMinAvailableBudget(namespace, name string, minAvailable int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ma := intstr.FromInt32(int32(minAvailable))
	s.w().pdbs = append(s.w().pdbs, policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-min"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &ma, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}})
}

// AddDaemonSet runs a pod of a DaemonSet on every registered node.
func (s *Server) AddDaemonSet(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w().daemonSets[namespace+"/"+name] = true
	for _, n := range s.nodeNames() {
		s.newPodLocked(namespace, name, n, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, Controller: ptr(true)})
	}
	s.bumpLocked()
}

// AddPod stores a pod as given: the odd ones a drain meets (a bare pod,
// a mirror pod, one whose DaemonSet is gone, one with emptyDir data).
// Its TypeMeta and UID are set; a pod without a phase runs, Ready, on its
// node. Evicted, it is deleted (recreated only when a ReplicaSet owns it).
func (s *Server) AddPod(p corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.w()
	w.serial++
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	p.UID = newUID(p.Namespace + "/" + p.Name + strconv.Itoa(w.serial))
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	w.pods[p.Namespace+"/"+p.Name] = &p
	s.bumpLocked()
}

// SetEvictionDiscovery makes discovery of /api/v1 list pods/eviction
// under groupVersion (policy/v1beta1: Kubernetes before 1.22), or not at
// all when it is "" (before 1.8). Evictions are still served.
func (s *Server) SetEvictionDiscovery(groupVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w().evictionGV = groupVersion
	if groupVersion == "" {
		s.w().evictionGV = "-"
	}
}

// Evictions lists the pods evicted, as "namespace/name@node", in order.
func (s *Server) Evictions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.w().evictions)
}

// RefusedEvictions lists the evictions a budget refused, as Evictions.
func (s *Server) RefusedEvictions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.w().refused)
}

// PodsOn lists "namespace/name" of the pods on node, sorted.
func (s *Server) PodsOn(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, p := range s.w().pods {
		if p.Spec.NodeName == node {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Unschedulable reports whether the node is cordoned.
func (s *Server) Unschedulable(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[node]
	return ok && n.Spec.Unschedulable
}

func ptr[T any](v T) *T { return &v }

// newPodLocked creates a Running, Ready pod (a DaemonSet's is named after the node).
func (s *Server) newPodLocked(namespace, app, node string, owner metav1.OwnerReference) *corev1.Pod {
	w := s.w()
	w.serial++
	name := fmt.Sprintf("%s-%05x", app, 0x1a2b3+w.serial*7919)
	if owner.Kind == "DaemonSet" {
		name = app + "-" + node
	}
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: newUID(namespace + "/" + name + strconv.Itoa(w.serial)), Labels: map[string]string{"app": app}, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: app, Image: "registry.example/" + app + ":1"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node != "" {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	w.pods[namespace+"/"+name] = p
	return p
}

// schedulable lists the nodes a new pod may go to, but not except.
func (s *Server) schedulable(except string) []string {
	var out []string
	for _, n := range s.nodeNames() {
		if nd := s.nodes[n]; !nd.Spec.Unschedulable && n != except {
			out = append(out, n)
		}
	}
	return out
}

// bumpLocked is a change of the store without a node watch event.
func (s *Server) bumpLocked() {
	s.rv++
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) patchNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		s.status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "read body", "")
		return
	}
	var out *corev1.Node
	var perr error
	s.update(func() []event {
		n, ok := s.nodes[name]
		if !ok {
			return nil
		}
		orig, err := json.Marshal(n)
		if err != nil {
			perr = err
			return nil
		}
		patched, err := strategicpatch.StrategicMergePatch(orig, body, corev1.Node{})
		if err != nil {
			perr = err
			return nil
		}
		var nn corev1.Node
		if err := json.Unmarshal(patched, &nn); err != nil {
			perr = err
			return nil
		}
		nn.Status = n.Status // the spec is what a client patches here
		*n = nn
		out = n.DeepCopy()
		return []event{{kind: "MODIFIED", node: *n}}
	})
	switch {
	case perr != nil:
		s.status(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch does not apply: "+perr.Error(), name)
	case out == nil:
		s.status(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("nodes %q not found", name), name)
	default:
		s.mu.Lock()
		out = s.nodes[name].DeepCopy()
		s.mu.Unlock()
		s.opts.Logf("kube-apiserver: node %s unschedulable=%v", name, out.Spec.Unschedulable)
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *Server) discoveryV1(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	gv := s.w().evictionGV
	s.mu.Unlock()
	res := []metav1.APIResource{
		{Name: "nodes", Kind: "Node", Verbs: metav1.Verbs{"get", "list", "watch", "patch"}},
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "list"}},
	}
	if gv != "-" {
		group, version := "policy", "v1"
		if gv != "" {
			group, version, _ = strings.Cut(gv, "/")
		}
		res = append(res, metav1.APIResource{Name: "pods/eviction", Namespaced: true, Group: group, Version: version, Kind: "Eviction", Verbs: metav1.Verbs{"create"}})
	}
	writeJSON(w, http.StatusOK, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1", APIResources: res})
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request) {
	node, ok := strings.CutPrefix(r.URL.Query().Get("fieldSelector"), "spec.nodeName=")
	if sel := r.URL.Query().Get("fieldSelector"); sel != "" && (!ok || strings.ContainsAny(node, ",=!")) {
		s.status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "field label not supported: "+sel, "")
		return
	}
	s.mu.Lock()
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rv, 10)}, Items: []corev1.Pod{}}
	ids := make([]string, 0, len(s.w().pods))
	for id := range s.w().pods {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if p := s.w().pods[id]; node == "" || p.Spec.NodeName == node {
			list.Items = append(list.Items, *p.DeepCopy())
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, &list)
}

func (s *Server) getPod(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("namespace") + "/" + r.PathValue("name")
	s.mu.Lock()
	p, ok := s.w().pods[id]
	var cp *corev1.Pod
	if ok {
		cp = p.DeepCopy()
	}
	s.mu.Unlock()
	if !ok {
		s.statusKind(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("pods %q not found", r.PathValue("name")), r.PathValue("name"), "pods")
		return
	}
	writeJSON(w, http.StatusOK, cp)
}

func (s *Server) getDaemonSet(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	s.mu.Lock()
	ok := s.w().daemonSets[ns+"/"+name]
	s.mu.Unlock()
	if !ok {
		s.statusKind(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("daemonsets.apps %q not found", name), name, "daemonsets")
		return
	}
	writeJSON(w, http.StatusOK, &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{Kind: "DaemonSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: newUID("ds/" + ns + "/" + name)}})
}

// evictPod is eviction.go's: the pod's budgets decide; an allowed eviction
// deletes the pod (its ReplicaSet recreates it elsewhere).
func (s *Server) evictPod(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var ev policyv1.Eviction
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ev); err != nil || ev.Name != name {
		s.status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "an Eviction of this pod is expected", name)
		return
	}
	s.mu.Lock()
	wl := s.w()
	p, ok := wl.pods[ns+"/"+name]
	if !ok {
		s.mu.Unlock()
		s.statusKind(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("pods %q not found", name), name, "pods")
		return
	}
	at := ns + "/" + name + "@" + p.Spec.NodeName
	for _, b := range wl.pdbs {
		if b.Namespace != ns || !matches(b.Spec.Selector, p.Labels) {
			continue
		}
		if s.disruptionsAllowedLocked(b) <= 0 {
			wl.refused = append(wl.refused, at)
			s.mu.Unlock()
			st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusTooManyRequests,
				Reason: metav1.StatusReasonTooManyRequests, Message: "Cannot evict pod as it would violate the pod's disruption budget.",
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "DisruptionBudget", Message: fmt.Sprintf("The disruption budget %s needs more healthy pods", b.Name)}}}}
			writeJSON(w, http.StatusTooManyRequests, &st)
			return
		}
	}
	delete(wl.pods, ns+"/"+name)
	wl.evictions = append(wl.evictions, at)
	if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "ReplicaSet" {
		node := ""
		if nodes := s.schedulable(p.Spec.NodeName); len(nodes) > 0 {
			node = nodes[0]
		}
		s.newPodLocked(ns, p.Labels["app"], node, *owner)
	}
	s.bumpLocked()
	s.mu.Unlock()
	s.opts.Logf("kube-apiserver: evicted %s", at)
	writeJSON(w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// disruptionsAllowedLocked is disruption.go's: healthy pods minus those
// the budget wants healthy.
func (s *Server) disruptionsAllowedLocked(b policyv1.PodDisruptionBudget) int {
	expected, healthy := 0, 0
	for _, p := range s.w().pods {
		if p.Namespace != b.Namespace || !matches(b.Spec.Selector, p.Labels) {
			continue
		}
		expected++
		if p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			healthy++
		}
	}
	desired := 0
	switch {
	case b.Spec.MinAvailable != nil:
		desired = b.Spec.MinAvailable.IntValue()
	case b.Spec.MaxUnavailable != nil:
		desired = expected - b.Spec.MaxUnavailable.IntValue()
	}
	return healthy - desired
}

func matches(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (s *Server) statusKind(w http.ResponseWriter, code int, reason metav1.StatusReason, msg, name, kind string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code), Details: &metav1.StatusDetails{Name: name, Kind: kind}}
	writeJSON(w, code, &st)
}
