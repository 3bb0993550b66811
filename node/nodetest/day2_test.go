package nodetest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// secureClient is a machinery client (talosctl's) with talosconfig tc.
func secureClient(t *testing.T, addr string, tc []byte) *client.Client {
	t.Helper()
	cfg, err := clientconfig.FromBytes(tc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(t.Context(), client.WithConfig(cfg), client.WithEndpoints(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) //nolint:errcheck
	return c
}

// maintenanceClient is talosctl --insecure.
func maintenanceClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.New(t.Context(), client.WithEndpoints(addr),
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // a maintenance node's self-signed certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) //nolint:errcheck
	return c
}

// incidentWorker is the user's incident on the fakes: a worker booted from
// the Newt image, configured with the 1.14 worker.yaml (no Newt
// ExtensionServiceConfig), so ext-newt waits and the boot never ends; a
// control plane beside it (its CA issues the worker's certificate).
func incidentWorker(t *testing.T, clock *nodetest.Clock) (*nodetest.Node, []byte) {
	t.Helper()
	tport := freeTCPPort(t, "127.0.0.45")
	w := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "worker-1", Addr: "127.0.0.45:" + tport, Schematic: newtSchematic(), Clock: clock})
	cp := nodetest.Start(t, nodetest.Options{BootConfig: true, Hostname: "cp-1", Addr: "127.0.0.46:" + tport})
	apply(t, cp, testkit.Testdata(t, "talos114/valid/controlplane.yaml"), "auto", false)
	apply(t, w, testkit.Testdata(t, "talos114/valid/worker.yaml"), "auto", false)
	return waitBooted(t, w), testkit.Testdata(t, "talos114/valid/talosconfig")
}

const newtESC = `apiVersion: v1alpha1
kind: ExtensionServiceConfig
name: newt
environment:
    - PANGOLIN_ENDPOINT=https://pangolin.example.net
    - NEWT_ID=n3wt1d0000000042
    - NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp1
`

// readStatus is talosflash status' read of the node.
func readStatus(t *testing.T, addr string, tc []byte) *node.Status {
	t.Helper()
	cfg, err := node.ParseTalosconfig(tc, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := node.OpenStatus(t.Context(), addr, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, err := r.Read(t.Context(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// serviceLog reads `talosctl logs <id>` of a Talos service.
func serviceLog(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx, "system", common.ContainerDriver_CONTAINERD, id, false, -1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for {
		m, err := rc.Recv()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatalf("logs %s: %v", id, err)
		}
		b.Write(m.GetBytes())
	}
}

// events reads every event of the node's boot (tail -1) up to the newest
// one now, as `talosctl events --tail -1` would print them.
func events(t *testing.T, c *client.Client) []client.Event {
	t.Helper()
	last := lastEventID(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, err := c.Events(ctx, client.WithTailEvents(-1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the hello event
		t.Fatal(err)
	}
	var out []client.Event
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("events: %v (after %d)", err, len(out))
		}
		ev, err := client.UnmarshalEvent(m)
		if err != nil {
			t.Fatalf("event %s: %v", m.GetData().GetTypeUrl(), err)
		}
		out = append(out, *ev)
		if m.GetId() == last {
			return out
		}
	}
}

// lastEventID is the ID of the newest event (tail 1).
func lastEventID(t *testing.T, c *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, err := c.Events(ctx, client.WithTailEvents(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return m.GetId()
}

func eventTexts(evs []client.Event) []string {
	var out []string
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *machine.SequenceEvent:
			out = append(out, "sequence "+p.GetSequence()+" "+p.GetAction().String())
		case *machine.TaskEvent:
			out = append(out, "task "+p.GetTask()+" "+p.GetAction().String())
		case *machine.ServiceStateEvent:
			out = append(out, "service "+p.GetService()+" "+p.GetAction().String()+": "+p.GetMessage())
		case *machine.MachineStatusEvent:
			s := "machine " + p.GetStage().String()
			if p.GetStatus().GetReady() {
				s += " ready"
			}
			out = append(out, s)
		}
	}
	return out
}

func hasAll(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// The incident recovers in place (Talos v1.14 controllers/runtime/
// extension_service.go handleRestart): while Newt's config is missing,
// ext-newt is Waiting with health unknown and the upstream event texts,
// has no Service resource, StartAllServices logs what it waits for every
// 15 s and the stage is booting; once the document arrives over mTLS, by a
// patch adding it or by --replace-document, the waiting service starts,
// the boot sequence completes, the stage is running, and the node does not
// reboot when BootTimeout passes.
func TestIncidentRecoversInPlace(t *testing.T) {
	for _, how := range []string{"patch", "replace-document"} {
		t.Run(how, func(t *testing.T) {
			clock := nodetest.NewClock(0)
			w, tc := incidentWorker(t, clock)
			c := secureClient(t, w.Addr(), tc)
			clock.Advance(31 * time.Second)

			st := readStatus(t, w.Addr(), tc)
			newt := st.Service("ext-newt")
			if st.Stage != "booting" || newt == nil || newt.State != "Waiting" || newt.Health != "unknown" || newt.LastEvent != "Waiting for extension service config" {
				t.Fatalf("before: stage %s, ext-newt %+v", st.Stage, newt)
			}
			svcs, err := safe.StateListAll[*v1alpha1.Service](t.Context(), c.COSI)
			if err != nil || svcs.Len() == 0 {
				t.Fatalf("Service resources: %v (%d)", err, svcs.Len())
			}
			for r := range svcs.All() {
				if r.Metadata().ID() == "ext-newt" {
					t.Fatal("a Service resource for the waiting ext-newt")
				}
			}
			log := serviceLog(t, c, "machined")
			hasAll(t, "machined's log", log,
				"[talos] service[ext-newt](Waiting): Waiting for service \"containerd\" to be \"up\", extension service config\n",
				"[talos] service[ext-newt](Waiting): Waiting for extension service config\n",
				"[talos] task startAllServices (1/1): waiting for 7 services\n",
			)
			if n := strings.Count(log, "[talos] task startAllServices (1/1): service \"ext-newt\" to be up/finished\n"); n != 2 {
				t.Errorf("%d 15-second lines after 31 s, want 2:\n%s", n, log)
			}
			if l := serviceLog(t, c, "ext-newt"); l != "" {
				t.Errorf("ext-newt has a log before it started: %q", l)
			}

			// What talosflash patch sends: the node's config with the document.
			cfg, err := node.ParseTalosconfig(tc, "")
			if err != nil {
				t.Fatal(err)
			}
			run, err := node.ReadRunning(t.Context(), w.Addr(), cfg, node.WaitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var patched *node.Patched
			if how == "patch" {
				patched, err = node.PatchConfig(run.Config, [][]byte{[]byte(newtESC)}, nil)
			} else {
				patched, err = node.PatchConfig(run.Config, nil, []node.Replacement{{Kind: "ExtensionServiceConfig", Name: "newt", Document: []byte(newtESC)}})
			}
			if err != nil || !patched.Changed {
				t.Fatalf("patch: %+v %v", patched, err)
			}
			dry, err := node.Apply(t.Context(), node.ApplyOptions{Endpoint: w.Addr(), Config: patched.Config, DryRun: true, Talosconfig: cfg})
			if err != nil || !strings.Contains(dry.ModeDetails, "+kind: ExtensionServiceConfig") {
				t.Fatalf("dry run: %v\n%+v", err, dry)
			}
			if _, err := node.Apply(t.Context(), node.ApplyOptions{Endpoint: w.Addr(), Config: patched.Config, Talosconfig: cfg}); err != nil {
				t.Fatal(err)
			}

			st = readStatus(t, w.Addr(), tc)
			newt = st.Service("ext-newt")
			if st.Stage != "running" || newt == nil || newt.State != "Running" || !strings.HasPrefix(newt.LastEvent, "Started task ext-newt") {
				t.Fatalf("after: stage %s, ext-newt %+v", st.Stage, newt)
			}
			if _, err := safe.StateGetByID[*v1alpha1.Service](t.Context(), c.COSI, "ext-newt"); err != nil {
				t.Errorf("no Service resource once ext-newt runs: %v", err)
			}
			hasAll(t, "machined's log", serviceLog(t, c, "machined"),
				"[talos] service[ext-newt](Running): Started task ext-newt",
				"[talos] task startAllServices (1/1): done, 31s\n",
				"[talos] boot sequence: done: 31s\n")
			ev := strings.Join(eventTexts(events(t, c)), "\n")
			hasAll(t, "events", ev,
				"sequence boot START\n",
				"machine BOOTING\n",
				"service ext-newt WAITING: Waiting for extension service config\n",
				"service ext-newt RUNNING: Started task ext-newt",
				"task startAllServices STOP\nsequence boot STOP\nmachine RUNNING")
			boot := w.BootID()
			clock.Advance(2 * time.Hour) // well past BootTimeout (70 min)
			if w.Reboots() != 0 || w.BootID() != boot {
				t.Fatalf("rebooted after the recovery: %d reboots", w.Reboots())
			}
			if st := readStatus(t, w.Addr(), tc); st.Stage != "running" {
				t.Fatalf("2 h later: %s", st.Stage)
			}
		})
	}
}

// Without the document, BootTimeout fails the boot: the task, the phase and
// the sequence fail (a FATAL NOOP SequenceEvent), the stage is rebooting,
// then a new boot (machined/main.go handle).
func TestIncidentBootTimeoutFailsTheSequence(t *testing.T) {
	clock := nodetest.NewClock(0)
	w, tc := incidentWorker(t, clock)
	c := secureClient(t, w.Addr(), tc)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ch := make(chan client.EventResult, 100)
	if err := c.EventsWatchV2(ctx, ch); err != nil {
		t.Fatal(err)
	}
	boot := w.BootID()
	clock.Advance(70 * time.Minute)
	var seen []string
	for {
		ev := <-ch
		if ev.Error != nil {
			t.Fatalf("%v after %q", ev.Error, seen)
		}
		switch p := ev.Event.Payload.(type) {
		case *machine.SequenceEvent:
			if p.GetAction() == machine.SequenceEvent_NOOP {
				if p.GetError().GetCode() != common.Code_FATAL || !strings.Contains(p.GetError().GetMessage(), "sequence failed: error running phase 9 in boot sequence: task 1/1: failed, context deadline exceeded") {
					t.Fatalf("failure event %+v", p)
				}
				seen = append(seen, "failed")
			}
		case *machine.MachineStatusEvent:
			if p.GetStage() == machine.MachineStatusEvent_REBOOTING {
				seen = append(seen, "rebooting")
			}
		}
		if len(seen) == 2 {
			break
		}
	}
	if err := w.WaitReboots(ctx, 1); err != nil || w.BootID() == boot {
		t.Fatalf("no new boot: %v", err)
	}
}

// talosctl reboot (and upgrade after its installer) follows a reboot
// through the Events API (cmd/talosctl/pkg/talos/action/tracker.go,
// node.go): the actor's events until stopAllServices, then after the
// reconnect every event of the new boot until a MachineStatusEvent running
// and ready, then a new boot ID. Also allowed to os:operator (machined.go).
func TestRebootFollowedThroughEvents(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true})
	tc, err := pki.Talosconfig("op", "os:operator", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c := secureClient(t, n.Addr(), tc)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ch := make(chan client.EventResult)
	if err := c.EventsWatchV2(ctx, ch, client.WithTailEvents(0)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.MachineClient.Reboot(ctx, &machine.RebootRequest{})
	if err != nil {
		t.Fatalf("reboot as os:operator: %v", err)
	}
	actor := resp.GetMessages()[0].GetActorId()
	if len(actor) != 36 {
		t.Fatalf("actor ID %q", actor)
	}
	var actorEvents []string
wait:
	for {
		select {
		case ev := <-ch:
			if ev.Error != nil {
				t.Fatalf("%v after %q", ev.Error, actorEvents)
			}
			if ev.Event.ActorID != actor {
				continue
			}
			actorEvents = append(actorEvents, eventTexts([]client.Event{ev.Event})...)
			if p, ok := ev.Event.Payload.(*machine.TaskEvent); ok && p.GetTask() == "stopAllServices" {
				break wait
			}
		case <-ctx.Done():
			t.Fatalf("no stopAllServices task event for actor %s: %q", actor, actorEvents)
		}
	}
	if actorEvents[0] != "sequence reboot START" {
		t.Errorf("actor's events %q", actorEvents)
	}
	if err := n.WaitReboots(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The tracker's reconnect: tail -1, every event of the new boot.
	var ready bool
	for !ready && ctx.Err() == nil {
		ch2 := make(chan client.EventResult)
		wctx, wcancel := context.WithCancel(ctx)
		if err := c.EventsWatchV2(wctx, ch2, client.WithTailEvents(-1)); err != nil {
			wcancel()
			time.Sleep(20 * time.Millisecond) // the API is coming back; talosctl retries likewise
			continue
		}
		for ev := range ch2 {
			if p, ok := ev.Event.Payload.(*machine.MachineStatusEvent); ok && p.GetStage() == machine.MachineStatusEvent_RUNNING && p.GetStatus().GetReady() {
				ready = true
				break
			}
		}
		wcancel()
	}
	if !ready || n.BootID() == "" {
		t.Fatal("no running and ready MachineStatusEvent after the reboot")
	}
	up, err := c.LifecycleClient.Upgrade(ctx, &machine.LifecycleServiceUpgradeRequest{})
	if err == nil {
		_, err = up.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("LifecycleService.Upgrade as os:operator: %v, want PermissionDenied", err)
	}
}

// Dmesg is the kernel log: kernel lines, then machined's "[talos]" lines
// as user warnings, in talosctl dmesg's format.
func TestDmesg(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true})
	tc, err := pki.Talosconfig("r", "os:reader", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c := secureClient(t, n.Addr(), tc)
	stream, err := c.Dmesg(t.Context(), false, false)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(m.GetBytes()))
	}
	text := strings.Join(lines, "\n")
	if len(lines) < 10 || !strings.HasPrefix(lines[0], "kern:    info: [") || !strings.Contains(lines[0], "]: Booting Linux on physical CPU") {
		t.Fatalf("dmesg:\n%s", text)
	}
	hasAll(t, "dmesg", text, "user: warning: [", "]: [talos] boot sequence: 9 phase(s)", "]: [talos] boot sequence: done: ")
}

// ResourceDefinitions for every type the fake serves, so talosctl resolves
// `get` kinds (pkg/machinery/client/resources.go ResolveResourceKind), and
// Talos' access policy over them (internal/app/resources/access.go).
func TestResourceDefinitionsResolveKinds(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: newtSchematic()})
	c := maintenanceClient(t, srv.Addr())
	for alias, want := range map[string]string{
		"extensions":            "ExtensionStatuses.runtime.talos.dev",
		"machinestatus":         "MachineStatuses.runtime.talos.dev",
		"rd":                    "ResourceDefinitions.meta.cosi.dev",
		"mc":                    "MachineConfigs.config.talos.dev",
		"imagefactoryschematic": "ImageFactorySchematics.runtime.talos.dev",
		"hostname":              "HostnameStatuses.net.talos.dev",
		"nodename":              "Nodenames.kubernetes.talos.dev",
		"svc":                   "Services.v1alpha1.talos.dev",
	} {
		var ns resource.Namespace
		rd, err := c.ResolveResourceKind(t.Context(), &ns, alias)
		if err != nil || rd.TypedSpec().Type != want || ns == "" {
			t.Errorf("get %s: %v %v (namespace %q), want %s", alias, rd, err, ns, want)
		}
	}
	list, err := safe.StateListAll[*runtime.ExtensionStatus](t.Context(), c.COSI)
	if err != nil || list.Len() != 2 {
		t.Fatalf("get extensions --insecure: %v", err)
	}
	_, err = c.COSI.Get(t.Context(), resource.NewMetadata("config", "MachineConfigs.config.talos.dev", "v1alpha1", resource.VersionUndefined))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not authorized") {
		t.Errorf("machine config, insecure: %v", err)
	}
	_, err = c.COSI.Get(t.Context(), resource.NewMetadata("runtime", "Unknowns.talos.dev", "x", resource.VersionUndefined))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `resource type "Unknowns.talos.dev" is not supported`) {
		t.Errorf("unregistered type: %v", err)
	}
	_, err = c.COSI.Get(t.Context(), resource.NewMetadata("nowhere", runtime.MachineStatusType, "machine", resource.VersionUndefined))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `namespace "nowhere" is not supported`) {
		t.Errorf("unknown namespace: %v", err)
	}
	if err := c.COSI.Create(t.Context(), runtime.NewExtensionStatus(runtime.NamespaceName, "99")); err == nil || !strings.Contains(err.Error(), "write access is not allowed") {
		t.Errorf("write: %v", err)
	}
	var mcNS resource.Namespace
	if _, err := c.ResolveResourceKind(t.Context(), &mcNS, "nosuchkind"); status.Code(err) != codes.NotFound {
		t.Errorf("unknown kind: %v", err)
	}
}

// addedKinds counts the kinds on a dry-run diff's added side.
func addedKinds(diff string) (kinds int, v1alpha1 bool) {
	for _, l := range strings.Split(diff, "\n") {
		if strings.HasPrefix(l, "+kind: ") {
			kinds++
		}
		if l == "+version: v1alpha1" {
			v1alpha1 = true
		}
	}
	return kinds, v1alpha1
}

// Dry runs diff every document as a 1.14 node writes them
// (v1alpha1_server.go generateDiff, container.go encodeToBuf): the
// maintenance diff of the generated control plane holds its 28 kinds and
// the v1alpha1 document (no `controlPlane: null` of the v1.13 encoder); on
// a configured node a change of KubeletConfig extraArgs alone is a diff.
// talosflash's own redaction of the node's diff still hides every secret.
func TestDryRunDiffsEvery114Document(t *testing.T) {
	cp := testkit.Testdata(t, "talos114/valid/controlplane.yaml")
	srv := nodetest.Start(t, nodetest.Options{})
	c := maintenanceClient(t, srv.Addr())
	resp, err := c.ApplyConfiguration(t.Context(), &machine.ApplyConfigurationRequest{Data: cp, Mode: machine.ApplyConfigurationRequest_AUTO, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	diff := resp.GetMessages()[0].GetModeDetails()
	kinds, v1 := addedKinds(diff)
	if kinds != 28 || !v1 || strings.Contains(diff, "controlPlane: null") || strings.Contains(diff, "# ") {
		t.Fatalf("maintenance dry run: %d kinds, v1alpha1 %v:\n%s", kinds, v1, diff)
	}
	if !strings.HasPrefix(diff, "Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\n--- a\n+++ b\n@@ ") {
		t.Fatalf("head:\n%.300s", diff)
	}
	// talosflash's redaction of that diff: every document, no secret.
	cpSecrets, err := nodetest.ConfigSecretFragments(cp)
	if err != nil {
		t.Fatal(err)
	}
	mres, err := node.Apply(t.Context(), node.ApplyOptions{Endpoint: srv.Addr(), Config: cp, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cpSecrets {
		if strings.Contains(mres.ModeDetails, s) {
			t.Fatalf("a fragment of the control plane's secrets in the redacted maintenance diff")
		}
	}
	if k, _ := addedKinds(mres.ModeDetails); k != 28 {
		t.Fatalf("the redacted maintenance diff shows %d kinds:\n%s", k, mres.ModeDetails)
	}

	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	worker := testkit.Testdata(t, "talos114/valid/worker.yaml")
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Config: worker})
	tc, err := pki.Talosconfig("a", "os:admin", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	sc := secureClient(t, n.Addr(), tc)
	dry := func(cfg []byte) string {
		t.Helper()
		r, err := sc.ApplyConfiguration(t.Context(), &machine.ApplyConfigurationRequest{Data: cfg, Mode: machine.ApplyConfigurationRequest_AUTO, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetMessages()[0].GetModeDetails()
	}
	if d := dry(worker); !strings.HasSuffix(d, "Config diff:\n\nNo changes.") {
		t.Fatalf("the same config:\n%s", d)
	}
	if !bytes.Contains(worker, []byte("kind: KubeletConfig\n")) {
		t.Fatal("worker.yaml has no KubeletConfig")
	}
	kubelet := bytes.Replace(worker, []byte("kind: KubeletConfig\n"), []byte("kind: KubeletConfig\nextraArgs:\n    rotate-server-certificates: \"true\"\n"), 1)
	d := dry(kubelet)
	var added, removed int
	for _, l := range strings.Split(d, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	if !strings.Contains(d, "+extraArgs:\n+    rotate-server-certificates: \"true\"\n") || added != 2 || removed != 0 {
		t.Fatalf("KubeletConfig extraArgs alone:\n%s", d)
	}

	// talosflash's redaction of what the node says, over every document.
	cfg, err := node.ParseTalosconfig(tc, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := node.Apply(t.Context(), node.ApplyOptions{Endpoint: n.Addr(), Config: kubelet, DryRun: true, Talosconfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := nodetest.ConfigSecretFragments(worker)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(res.ModeDetails, s) {
			t.Fatalf("a fragment of the config's secrets in the redacted diff:\n%s", res.ModeDetails)
		}
	}
	if !strings.Contains(res.ModeDetails, "+extraArgs:") {
		t.Fatalf("redacted diff lost the change:\n%s", res.ModeDetails)
	}
}

// LifecycleService.Upgrade with an installer that was not pulled (into the
// containerd instance and namespace it names) is a gRPC Internal error
// with no streamed message or exit code (internal/app/lifecycle/
// lifecycle.go, container.go); ImageService.Pull is allowed to os:operator
// and answers the reference pinned to its digest; Version has the tag,
// SHA, Go version, OS, platform and features.
func TestUpgradeErrorShapesRolesAndVersion(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true})
	admin, err := pki.Talosconfig("a", "os:admin", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	op, err := pki.Talosconfig("o", "os:operator", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c, oc := secureClient(t, n.Addr(), admin), secureClient(t, n.Addr(), op)
	const ref = "factory.talos.dev/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.6"
	system := &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_SYSTEM}
	upgrade := func(ctr *common.ContainerdInstance) (msgs int, err error) {
		t.Helper()
		s, err := c.LifecycleClient.Upgrade(t.Context(), &machine.LifecycleServiceUpgradeRequest{Containerd: ctr, Source: &machine.InstallArtifactsSource{ImageName: ref}})
		if err != nil {
			return 0, err
		}
		for {
			_, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return msgs, nil
			}
			if err != nil {
				return msgs, err
			}
			msgs++
		}
	}
	msgs, err := upgrade(system)
	if status.Code(err) != codes.Internal || msgs != 0 ||
		status.Convert(err).Message() != `upgrade failed: installer image "`+ref+`" not found in containerd store: image "`+ref+`": not found` {
		t.Fatalf("not pulled: %d messages, %v", msgs, err)
	}
	// Pulled as os:operator into the k8s.io namespace: still not there for the system one.
	pull, err := oc.ImageClient.Pull(t.Context(), &machine.ImageServicePullRequest{Containerd: &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_CRI}, ImageRef: ref})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for {
		m, err := pull.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("pull as os:operator: %v", err)
		}
		if m.GetName() != "" {
			name = m.GetName()
		}
	}
	if !strings.HasPrefix(name, strings.TrimSuffix(ref, ":v1.14.6")+"@sha256:") {
		t.Errorf("pulled name %q", name)
	}
	if _, err := upgrade(system); status.Code(err) != codes.Internal {
		t.Fatalf("pulled into another namespace: %v", err)
	}
	if _, err := upgrade(nil); status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "invalid containerd namespace") {
		t.Fatalf("no containerd instance: %v", err)
	}
	if _, err := oc.ImageClient.Pull(t.Context(), &machine.ImageServicePullRequest{Containerd: system, ImageRef: ref}); err != nil {
		t.Fatal(err)
	}
	p2, _ := oc.ImageClient.Pull(t.Context(), &machine.ImageServicePullRequest{Containerd: system, ImageRef: ref})
	for _, err := p2.Recv(); err == nil; _, err = p2.Recv() {
	}
	if msgs, err := upgrade(system); err != nil || msgs < 2 {
		t.Fatalf("pulled: %d messages, %v", msgs, err)
	}

	v, err := oc.Version(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := v.GetMessages()[0]
	if vi := m.GetVersion(); vi.GetTag() != nodetest.DefaultVersion || len(vi.GetSha()) != 8 || !strings.HasPrefix(vi.GetGoVersion(), "go1.") || vi.GetOs() != "linux" || vi.GetArch() != "arm64" ||
		m.GetPlatform().GetName() != "metal" || !m.GetFeatures().GetRbac() {
		t.Fatalf("version %+v", m)
	}
}

// Hostnames by Talos' layers (pkg/machinery/resources/network/configlayer.go,
// controllers/network/hostname_config.go): the card's (platform layer) or
// fakenode's --hostname stays under a config whose HostnameConfig says
// `auto: stable`; a static `hostname:` (configuration layer) replaces it,
// as soon as it is applied. The Kubernetes node name is the Nodenames
// resource (controllers/k8s/nodename.go): the short hostname, the FQDN with
// KubeNodeConfig registerWithFQDN; talosflash reads it with
// node.ReadNodename and in status.
func TestHostnameLayersAndNodename(t *testing.T) {
	worker := testkit.Testdata(t, "talos114/valid/worker.yaml")
	if !bytes.Contains(worker, []byte("kind: HostnameConfig\nauto: stable")) || !bytes.Contains(worker, []byte("kind: KubeNodeConfig\n")) {
		t.Fatal("worker.yaml's HostnameConfig or KubeNodeConfig changed")
	}
	static := bytes.Replace(worker, []byte("kind: HostnameConfig\nauto: stable"), []byte("kind: HostnameConfig\nhostname: static-1.lab.example"), 1)
	fqdn := bytes.Replace(static, []byte("kind: KubeNodeConfig\n"), []byte("kind: KubeNodeConfig\nregisterWithFQDN: true\n"), 1)
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name             string
		cfg              []byte
		hostname, domain string
		nodename         string
	}{
		{"auto stable keeps the card's", worker, "worker-1", "", "worker-1"},
		{"static hostname wins", static, "static-1", "lab.example", "static-1"},
		{"register with FQDN", fqdn, "static-1", "lab.example", "static-1.lab.example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Hostname: "Worker-1", Config: c.cfg})
			tcData, err := pki.Talosconfig("a", "os:admin", n.Addr())
			if err != nil {
				t.Fatal(err)
			}
			tc, err := node.ParseTalosconfig(tcData, "")
			if err != nil {
				t.Fatal(err)
			}
			run, err := node.ReadRunning(t.Context(), n.Addr(), tc, node.WaitOptions{})
			if err != nil || !strings.EqualFold(run.Hostname, c.hostname) || run.Domainname != c.domain {
				t.Fatalf("hostname %q domain %q (%v), want %q %q", run.Hostname, run.Domainname, err, c.hostname, c.domain)
			}
			name, ok, err := node.ReadNodename(t.Context(), n.Addr(), tc, node.WaitOptions{})
			if err != nil || !ok || name != c.nodename {
				t.Fatalf("node name %q %v %v, want %q", name, ok, err, c.nodename)
			}
			if st := readStatus(t, n.Addr(), tcData); st.Nodename != c.nodename {
				t.Fatalf("status node name %q", st.Nodename)
			}
		})
	}

	// Applied to a running node: the new hostname at once.
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Hostname: "worker-1", Config: worker})
	tcData, err := pki.Talosconfig("a", "os:admin", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := node.ParseTalosconfig(tcData, "")
	if _, err := node.Apply(t.Context(), node.ApplyOptions{Endpoint: n.Addr(), Config: fqdn, Talosconfig: tc}); err != nil {
		t.Fatal(err)
	}
	if name, _, err := node.ReadNodename(t.Context(), n.Addr(), tc, node.WaitOptions{}); err != nil || name != "static-1.lab.example" || n.CurrentHostname() != "static-1.lab.example" {
		t.Fatalf("after the apply: node name %q (%v), hostname %q", name, err, n.CurrentHostname())
	}
}
