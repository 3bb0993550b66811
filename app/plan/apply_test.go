package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

func imageOf(t *testing.T, role string) nodetest.Options {
	t.Helper()
	p, err := factory.FindProfile(factory.BuiltinProfiles(), role)
	if err != nil {
		t.Fatal(err)
	}
	return nodetest.Options{Schematic: p.Schematic()}
}

// recorder keeps the job's events.
type recorder struct{ events []ApplyEvent }

func (r *recorder) event(ev ApplyEvent) { r.events = append(r.events, ev) }

func (r *recorder) phases() []ApplyPhase {
	var out []ApplyPhase
	for _, ev := range r.events {
		if ev.Kind == EventPhase {
			out = append(out, ev.Phase)
		}
	}
	return out
}

func (r *recorder) count(k ApplyEventKind) int {
	n := 0
	for _, ev := range r.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func applyJob(srv *nodetest.Server, name string, data []byte, rec *recorder) ApplyJob {
	return ApplyJob{Endpoint: srv.Addr(), Name: name, Config: data, Event: rec.event,
		Check: NodeCheck{Profiles: factory.BuiltinProfiles(), Factory: factory.NewClient("http://127.0.0.1:1", nil)}}
}

// Both generations: the node's dry run first on Talos >= 1.13 only, then the
// file byte for byte, pinned; the events in order; what the node does next.
func TestApplySendsByteForBytePerGeneration(t *testing.T) {
	for _, gen := range []struct {
		name   string
		opts   nodetest.Options
		phases []ApplyPhase
		next   string
	}{
		{"1.14", imageOf(t, "worker"), []ApplyPhase{PhaseProbe, PhaseCheck, PhaseDryRun, PhaseSend},
			"The node leaves maintenance mode and boots with this config now, without a reboot (Talos v1.14.5 answers no-reboot"},
		{"legacy", nodetest.Options{Legacy: true}, []ApplyPhase{PhaseProbe, PhaseCheck, PhaseSend},
			"Talos v1.12.6 does not say how: booted from a card flashed with the raw image, which is installed already, it boots on without a reboot"},
	} {
		t.Run(gen.name, func(t *testing.T) {
			srv := nodetest.Start(t, gen.opts)
			data := testkit.Testdata(t, "worker.yaml")
			var rec recorder
			job := applyJob(srv, "worker.yaml", data, &rec)
			if gen.opts.Legacy {
				job.Check.Declared = "worker" // the node does not say what it booted
			}
			out, err := Apply(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			want := 1
			if !gen.opts.Legacy {
				want = 2
				if !reqs[0].DryRun || !bytes.Equal(reqs[0].Config, data) {
					t.Fatal("the node's dry run did not come first with the file")
				}
			}
			if len(reqs) != want || reqs[want-1].DryRun || !bytes.Equal(reqs[want-1].Config, data) {
				t.Fatalf("node got %d requests; want %d, the last the file byte for byte", len(reqs), want)
			}
			if got := rec.phases(); !slices.Equal(got, gen.phases) {
				t.Errorf("phases %v, want %v", got, gen.phases)
			}
			if v := rec.count(EventVerdict); v != want-1 {
				t.Errorf("%d verdicts", v)
			}
			if rec.count(EventNode) != 1 || out.Node == nil || out.Node.CertFingerprint == "" || out.Result.CertFingerprint != out.Node.CertFingerprint {
				t.Errorf("node %+v, answer from %q", out.Node, out.Result.CertFingerprint)
			}
			if !strings.HasPrefix(out.Next.Node, gen.next) && !strings.Contains(out.Next.Node, gen.next) {
				t.Errorf("next %q, want %q", out.Next.Node, gen.next)
			}
			if !out.Next.LeavesMaintenance || out.Next.Bootstrap || out.Next.Then != "" {
				t.Errorf("next %+v after a worker config", out.Next)
			}
			for _, lie := range []string{"installs Talos and reboots", "rebooted with its config"} {
				if strings.Contains(out.Next.Node, lie) {
					t.Errorf("next says %q: %s", lie, out.Next.Node)
				}
			}
		})
	}
}

// A node that already has a config is refused before any config check,
// and nothing is sent.
func TestApplyRefusesConfiguredNode(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Configured: true})
	var rec recorder
	out, err := Apply(context.Background(), applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec))
	var ce *ConfiguredError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConfigured) || !errors.Is(err, node.ErrRefused) {
		t.Fatalf("err %v", err)
	}
	if len(srv.Requests()) != 0 || rec.count(EventFinding) != 0 || out.Node == nil || !out.Node.Configured {
		t.Fatalf("requests %d, findings %d, node %+v", len(srv.Requests()), rec.count(EventFinding), out.Node)
	}
}

// The incident: a worker config for the node that booted the Newt image,
// which the user says is a worker's card (--role worker: a worker may run
// Newt). Blocked with nothing sent; Force (the CLI's --force, the GUI's
// tick) sends.
func TestApplyBlockingFindingSendsNothing(t *testing.T) {
	srv := nodetest.Start(t, imageOf(t, "controlplane"))
	data := testkit.Testdata(t, "worker.yaml")
	var rec recorder
	job := applyJob(srv, "worker.yaml", data, &rec)
	job.Check.Declared = "worker"
	out, err := Apply(context.Background(), job)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || !errors.Is(err, node.ErrInvalidConfig) || len(blocked.Findings) == 0 {
		t.Fatalf("err %v", err)
	}
	if blocked.Findings[0].Code != node.CodeExtensionConfigMissing || out.Blocking() != len(blocked.Findings) || rec.count(EventFinding) != len(out.Findings) {
		t.Fatalf("findings %+v", out.Findings)
	}
	if slices.Contains(rec.phases(), PhaseDryRun) || len(srv.Requests()) != 0 {
		t.Fatalf("sent %d requests", len(srv.Requests()))
	}

	// Two phases on one job (the GUI's confirmation in between): the same gate.
	rv, err := CheckApply(context.Background(), job)
	if err != nil || rv.Blocking() == 0 {
		t.Fatalf("check: %v", err)
	}
	if _, err := rv.Send(context.Background(), false); !errors.As(err, &blocked) || len(srv.Requests()) != 0 {
		t.Fatalf("send without the override: %v, %d requests", err, len(srv.Requests()))
	}
	// A review whose check failed never sends, forced or not.
	cfgd := nodetest.Start(t, nodetest.Options{Configured: true})
	failed, err := CheckApply(context.Background(), applyJob(cfgd, "worker.yaml", data, &rec))
	if err == nil || failed == nil {
		t.Fatalf("check of a configured node: %v", err)
	}
	if _, err := failed.Send(context.Background(), true); err == nil || len(cfgd.Requests()) != 0 {
		t.Fatalf("send after a failed check: %v", err)
	}
	if _, err := rv.Send(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || !bytes.Equal(reqs[1].Config, data) {
		t.Fatalf("forced: %d requests", len(reqs))
	}
}

// Without a probed certificate nothing is sent: the apply is pinned to the
// node that was checked, never sent to whatever answers at the address.
func TestApplyRefusesEmptyFingerprint(t *testing.T) {
	for _, opts := range []nodetest.Options{imageOf(t, "worker"), {Legacy: true}} {
		srv := nodetest.Start(t, opts)
		var rec recorder
		job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
		job.Check.Declared = "worker"
		job.Probe = func(ctx context.Context, addr string) (*node.Node, error) {
			n, err := node.Probe(ctx, addr)
			if n != nil {
				n.CertFingerprint = ""
			}
			return n, err
		}
		for _, dry := range []bool{false, true} {
			job.DryRun = dry
			_, err := Apply(context.Background(), job)
			if !errors.Is(err, ErrNoFingerprint) || !strings.Contains(err.Error(), "nothing was sent") {
				t.Fatalf("legacy %v dry run %v: err %v", opts.Legacy, dry, err)
			}
		}
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("legacy %v: the node got %d requests", opts.Legacy, n)
		}
	}
}

// A node answering with another certificate than the probed one gets
// nothing past the TLS handshake (the pin is the probed fingerprint).
func TestApplyPinnedToProbedCertificate(t *testing.T) {
	srv := nodetest.Start(t, imageOf(t, "worker"))
	var rec recorder
	job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.Probe = func(ctx context.Context, addr string) (*node.Node, error) {
		n, err := node.Probe(ctx, addr)
		if n != nil {
			n.CertFingerprint = "another-machine"
		}
		return n, err
	}
	if _, err := Apply(context.Background(), job); !errors.Is(err, node.ErrNetwork) || !strings.Contains(err.Error(), "not the pinned one") {
		t.Fatalf("err %v", err)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("the config reached a node with another certificate")
	}
}

// DryRun asks the node's dry run only; modes Talos <= 1.12 does not take
// are refused before anything is sent.
func TestApplyDryRunAndModes(t *testing.T) {
	srv := nodetest.Start(t, imageOf(t, "worker"))
	var rec recorder
	job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.DryRun = true
	out, err := Apply(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !reqs[0].DryRun || !out.Result.DryRun || out.Next.LeavesMaintenance {
		t.Fatalf("dry run: %d requests, next %+v", len(reqs), out.Next)
	}

	legacy := nodetest.Start(t, nodetest.Options{Legacy: true})
	job = applyJob(legacy, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.Mode = node.ModeStaged
	_, err = Apply(context.Background(), job)
	var input *InputError
	if !errors.As(err, &input) || input.Setting != "mode" || !strings.Contains(err.Error(), "only accepts auto, reboot, try") || len(legacy.Requests()) != 0 {
		t.Fatalf("staged on 1.12: %v", err)
	}
	job.Mode = "banana"
	if _, err := CheckApply(context.Background(), job); !errors.As(err, &input) {
		t.Fatalf("bad mode: %v", err)
	}
}

// What the node does next, per generation and answer; the bootstrap step
// after a control plane config only (an init config starts etcd itself).
func TestAfterApply(t *testing.T) {
	v114 := &node.Node{TalosVersion: "v1.14.5"}
	v112 := &node.Node{}
	answered := func(mode string) *node.ApplyResult {
		return &node.ApplyResult{Messages: []node.ApplyMessage{{Mode: mode}}}
	}
	for _, c := range []struct {
		name       string
		n          *node.Node
		role       node.Role
		res        *node.ApplyResult
		leaves     bool
		bootstrap  bool
		text, then string
	}{
		{"1.14 worker", v114, "worker", answered("no-reboot"), true, false, "without a reboot (Talos v1.14.5 answers no-reboot", ""},
		{"1.14 control plane", v114, "controlplane", answered("no-reboot"), true, true, "boots with this config now", "bootstrap etcd once per cluster"},
		{"1.14 init", v114, "init", answered("no-reboot"), true, false, "boots with this config now", "starts etcd as the cluster's first member by itself"},
		{"1.14 staged", v114, "controlplane", answered("staged"), false, true, "stays in maintenance mode until it reboots", "bootstrap etcd"},
		{"1.14 try", v114, "controlplane", answered("try"), false, false, "reverts it after 1m0s", ""},
		{"1.12 worker", v112, "worker", answered(""), true, false, "does not say how", ""},
		{"1.12 control plane", v112, "controlplane", answered(""), true, true, "installs Talos to machine.install.disk and reboots", "bootstrap etcd"},
		{"dry run", v114, "controlplane", &node.ApplyResult{DryRun: true, Messages: []node.ApplyMessage{{Mode: "no-reboot"}}}, false, false, "Nothing was applied", ""},
	} {
		got := AfterApply(c.n, c.role, c.res)
		if got.LeavesMaintenance != c.leaves || got.Bootstrap != c.bootstrap || !strings.Contains(got.Node, c.text) || !strings.Contains(got.Then, c.then) || (c.then == "" && got.Then != "") {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
	// The confirmation's expectation is the answer's text for mode auto.
	rv := &ApplyReview{Node: v114, Config: &node.Config{MachineType: "worker"}, Job: ApplyJob{Mode: node.ModeAuto}}
	if rv.Expected() != AfterApply(v114, "worker", answered("no-reboot")) {
		t.Errorf("expected %+v", rv.Expected())
	}
	rv.Node = v112
	if rv.Expected() != AfterApply(v112, "worker", answered("")) {
		t.Errorf("expected %+v", rv.Expected())
	}
}

// Ctrl-C while the node holds its dry run: an InterruptedError that says
// nothing was applied and unwraps to context.Canceled.
func TestApplyInterrupted(t *testing.T) {
	gate := make(chan struct{}) // never opened
	opts := imageOf(t, "worker")
	opts.Gate = gate
	ctx, cancel := context.WithCancel(context.Background())
	opts.Logf = func(format string, args ...any) {
		if strings.HasPrefix(format, "ApplyConfiguration") {
			cancel() // the dry run reached the node; the gate holds it until cancelled
		}
	}
	srv := nodetest.Start(t, opts)
	var rec recorder
	job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	_, err := Apply(ctx, job)
	var ie *node.InterruptedError
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was applied") || !strings.Contains(err.Error(), "during the node's dry run") {
		t.Fatalf("err %v", err)
	}
	for _, r := range srv.Requests() {
		if !r.DryRun {
			t.Fatal("applied after the interrupt")
		}
	}
}

// The user's talos/installer-<role>.yaml beside the config is found and
// named by the installer fixes (node.FindInstallerPatch was never called).
// A worker config that says `join` or leaves the type out is a worker to
// Talos, and its installer patch is the worker's too.
func TestCheckApplyNamesTheInstallerPatch(t *testing.T) {
	worker := testkit.Testdata(t, "talos114/user/worker.yaml")
	for name, data := range map[string][]byte{
		"type: worker": worker,
		"type: join":   bytes.Replace(worker, []byte("type: worker"), []byte("type: join"), 1),
		"no type":      regexp.MustCompile(`(?m)^    type: worker.*\n`).ReplaceAll(worker, nil),
	} {
		t.Run(name, func(t *testing.T) { checkApplyNamesTheInstallerPatch(t, data) })
	}
}

func checkApplyNamesTheInstallerPatch(t *testing.T, data []byte) {
	dir := t.TempDir()
	cfgPath := dir + "/worker.yaml"
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir+"/talos", 0o700); err != nil {
		t.Fatal(err)
	}
	patch := dir + "/talos/installer-worker.yaml"
	if err := os.WriteFile(patch, []byte("apiVersion: v1alpha1\nkind: UnattendedInstallConfig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := nodetest.Start(t, imageOf(t, "worker"))
	job := applyJob(srv, "worker.yaml", data, &recorder{})
	job.ConfigPath = cfgPath
	rv, err := CheckApply(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, f := range rv.Findings {
		named = named || strings.Contains(f.Message+f.Fix, patch)
	}
	if !named {
		t.Errorf("no finding names the patch %s: %+v", patch, rv.Findings)
	}
	if len(srv.Requests()) != 0 {
		t.Error("CheckApply sent something")
	}
}

// A config of another role than the node's (issue 37): worker.yaml for a
// node that booted the control plane's image, or for the inventory's
// control plane, is a role mismatch naming the right file, refused by
// CheckApply itself; no force sends it (it would make a control plane a
// worker).
func TestApplyRoleMismatchIsNotForceable(t *testing.T) {
	data := testkit.Testdata(t, "worker.yaml")
	for _, c := range []struct {
		name   string
		expect bool
		want   []string
	}{
		{"the booted image's role", false, []string{"is a control plane (it booted the controlplane image)", "worker.yaml is a worker config", "apply the controlplane.yaml that talosctl gen config wrote"}},
		{"the inventory's role", true, []string{"cp-1 is a control plane (the inventory's role)", "apply cp-1's own config, talos/controlplane.yaml"}},
	} {
		opts := imageOf(t, "controlplane")
		opts.Hostname = "cp-1"
		srv := nodetest.Start(t, opts)
		var rec recorder
		job := applyJob(srv, "worker.yaml", data, &rec)
		if c.expect {
			job.Expect = testMember(t, "cp-1", node.RoleControlPlane, "controlplane", srv.Addr())
			job.Expect.Config = "talos/controlplane.yaml"
		}
		job.Force = true
		rv, err := CheckApply(context.Background(), job)
		var rm *RoleMismatchError
		if !errors.As(err, &rm) || !errors.Is(err, node.ErrInvalidConfig) {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		if _, err := rv.Send(context.Background(), true); err == nil {
			t.Fatalf("%s: a forced send went through", c.name)
		}
		if _, err := Apply(context.Background(), job); !errors.As(err, &rm) || len(srv.Requests()) != 0 {
			t.Fatalf("%s: Apply with Force: %v, %d requests", c.name, err, len(srv.Requests()))
		}
	}
}

// What this build's machinery cannot check is said in one line with a
// count, never as the list of the 11 to 24 Talos 1.14 kinds the node
// validates anyway (issue 39).
func TestUncheckedNoteIsOneLine(t *testing.T) {
	for _, c := range []struct {
		unchecked []string
		want      string
	}{
		{nil, ""},
		{[]string{`document 5 ("ResolverConfig"): not checked locally (has fields newer than Talos machinery v1.13); a Talos 1.14 node checks them`},
			"1 document is newer than Talos machinery v1.13: not checked here; the node checks them in its dry run"},
		{[]string{`documents 2, 3, 4 ("DiscoveryServiceConfig", "DiscoveryIdentityConfig", "UnattendedInstallConfig"): not checked locally (newer than Talos machinery v1.13); a Talos 1.14 node checks them`,
			`document 5 ("ResolverConfig"): not checked locally (has fields newer than Talos machinery v1.13); a Talos 1.14 node checks them`},
			"4 documents are newer than Talos machinery v1.13: not checked here; the node checks them in its dry run"},
	} {
		if got := UncheckedNote(&node.Config{Unchecked: c.unchecked}); got != c.want {
			t.Errorf("%q: %q, want %q", c.unchecked, got, c.want)
		}
	}
}
