package nodetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/internal/talos114"
)

// withInstall adds a .machine.install section to a 1.14 config.
func withInstall(t testing.TB, cfg []byte) []byte {
	t.Helper()
	out := bytes.Replace(cfg, []byte("\nmachine:\n"), []byte("\nmachine:\n    install:\n        disk: /dev/sda\n"), 1)
	if bytes.Equal(out, cfg) {
		t.Fatal("no machine section")
	}
	return out
}

// verdicts114 are configs with what Talos v1.14.0-rc.1 (the talos114
// own loader and validator, `talosctl validate`) answers: "valid" or "invalid: ..." with its reason.
// The fake with RC1Rules must answer the same; TestRules114MatchOracle
// re-checks the expectations against a talosctl v1.14 on PATH where there is one.
func verdicts114(t testing.TB) []struct {
	name string
	cfg  []byte
	want string
} {
	return []struct {
		name string
		cfg  []byte
		want string
	}{
		{"valid/controlplane", testkit.Testdata(t, "talos114/valid/controlplane.yaml"), "valid"},
		{"valid/worker", testkit.Testdata(t, "talos114/valid/worker.yaml"), "valid"},
		{"user/controlplane", testkit.Testdata(t, "talos114/user/controlplane.yaml"), "invalid: 1 error occurred:\n\t* UnattendedInstallConfig: provisioning.volumeSelector.match is required\n\n"},
		{"user/worker", testkit.Testdata(t, "talos114/user/worker.yaml"), "invalid: 2 errors occurred:\n\t* UnattendedInstallConfig: provisioning.volumeSelector.match is required\n\t* the following document kinds are only allowed on control plane machines: [KubeProxyConfig]\n\n"},
		{"valid/worker+machine.install", withInstall(t, testkit.Testdata(t, "talos114/valid/worker.yaml")), "invalid: 1 error occurred:\n\t* UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)\n\n"},
		{"valid/worker+unknown kind", append(testkit.Testdata(t, "talos114/valid/worker.yaml"), "---\napiVersion: v1alpha1\nkind: NoSuchConfig\nfoo: 1\n"...),
			"invalid: error decoding document v1alpha1/NoSuchConfig/ (line 232): \"NoSuchConfig\" \"v1alpha1\": not registered"},
	}
}

// fakeVerdict is what the fake node decides, in those words.
func fakeVerdict(cfg []byte, rc1 bool) (string, []string) {
	_, warnings, loadErr, validateErr := validate114(cfg, rc1)
	switch {
	case loadErr != "":
		return "invalid: " + loadErr, warnings
	case validateErr != "":
		return "invalid: " + validateErr, warnings
	}
	return "valid", warnings
}

func TestRules114RC1MatchRecordedVerdicts(t *testing.T) {
	for _, c := range verdicts114(t) {
		if got, _ := fakeVerdict(c.cfg, true); got != c.want {
			t.Errorf("%s: fake with rc.1 rules says\n%q\nTalos v1.14.0-rc.1 says\n%q", c.name, got, c.want)
		}
	}
}

// Without the rc.1 option the two rules the user's cluster contradicts are
// off: the user's own files are accepted; every other rule still holds.
func TestRules114DefaultOffRC1Only(t *testing.T) {
	for _, c := range verdicts114(t) {
		want := c.want
		if strings.HasPrefix(c.name, "user/") {
			want = "valid"
		}
		if got, _ := fakeVerdict(c.cfg, false); got != want {
			t.Errorf("%s: fake says %q, want %q", c.name, got, want)
		}
	}
	_, w := fakeVerdict(testkit.Testdata(t, "talos114/valid/worker.yaml"), false)
	if !strings.Contains(strings.Join(w, "\n"), msgUICNoImage) {
		t.Errorf("no warning for the empty installer.image: %q", w)
	}
}

// The recorded verdicts are what Talos v1.14 says (`talosctl validate` of
// a talosctl v1.14 on PATH; skipped without one).
func TestRules114MatchTalosctl(t *testing.T) {
	for i, c := range verdicts114(t) {
		if got := testkit.TalosctlValidate(t, c.cfg); !testkit.SameVerdict(got, c.want) {
			t.Errorf("case %d %s: talosctl says\n%q\nrecorded\n%q", i, c.name, got, c.want)
		}
	}
}

// Every rule names its upstream source; rc.1 rules are the two the user's
// cluster contradicts.
func TestRules114Table(t *testing.T) {
	var rc1 []string
	for _, r := range rules114 {
		if r.source == "" || r.name == "" || (r.check == nil) != (r.adjust || r.served) || r.adjust && r.served {
			t.Errorf("rule %+v: needs a name, a source and one of a check, adjust or served", r.name)
		}
		if r.rc1 {
			rc1 = append(rc1, r.name)
		}
	}
	if len(rc1) != 1 { // plus KubeProxyConfig inside the control plane rule
		t.Errorf("rc.1 rules: %q", rc1)
	}
	for _, k := range controlPlaneOnlyKinds {
		if !talos114.NewerThanV113(k) {
			t.Errorf("%s is not a 1.14 kind", k)
		}
	}
}

func insecureClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), client.WithEndpoints(addr),
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // a maintenance node's self-signed certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Over gRPC: the generated configs are accepted and kept byte for byte; the
// conflict is InvalidArgument with the node's message.
func TestServer114AcceptsGeneratedByteForByte(t *testing.T) {
	srv := Start(t, Options{})
	c := insecureClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sent [][]byte
	for _, name := range []string{"valid/controlplane.yaml", "valid/worker.yaml", "user/controlplane.yaml", "user/worker.yaml"} {
		cfg := testkit.Testdata(t, "talos114/"+name)
		if _, err := c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: cfg, Mode: machine.ApplyConfigurationRequest_AUTO}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sent = append(sent, cfg)
	}
	_, err := c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: withInstall(t, testkit.Testdata(t, "talos114/valid/worker.yaml"))})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), msgUICConflict) {
		t.Fatalf("conflict: %v", err)
	}
	reqs := srv.Requests()
	for i, cfg := range sent {
		if !bytes.Equal(reqs[i].Config, cfg) {
			t.Errorf("request %d: bytes differ", i)
		}
	}

	rc1 := Start(t, Options{RC1Rules: true})
	_, err = insecureClient(t, rc1.Addr()).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: testkit.Testdata(t, "talos114/user/worker.yaml")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), msgUICSelector) || !strings.Contains(err.Error(), "[KubeProxyConfig]") {
		t.Fatalf("rc.1 node on the user's worker.yaml: %v", err)
	}
}

// Admin-only calls from an insecure client: PermissionDenied on >= 1.13,
// not served by <= 1.12 maintenance mode.
func TestServerAdminCallsNotAuthorized(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := insecureClient(t, Start(t, Options{}).Addr())
	check := func(what string, err error, code codes.Code) {
		t.Helper()
		if status.Code(err) != code || code == codes.PermissionDenied && status.Convert(err).Message() != "not authorized" {
			t.Errorf("%s: %v, want %v", what, err, code)
		}
	}
	//lint:ignore SA1019 the legacy upgrade API is one of the admin-only calls a node must refuse
	_, err := c.MachineClient.Upgrade(ctx, &machine.UpgradeRequest{Image: "x"})
	check("Upgrade", err, codes.PermissionDenied)
	check("Bootstrap", c.Bootstrap(ctx, &machine.BootstrapRequest{}), codes.PermissionDenied)
	_, err = c.MachineClient.Reset(ctx, &machine.ResetRequest{})
	check("Reset", err, codes.PermissionDenied)
	stream, err := c.LifecycleClient.Upgrade(ctx, &machine.LifecycleServiceUpgradeRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	check("LifecycleService.Upgrade", err, codes.PermissionDenied)

	legacy := insecureClient(t, Start(t, Options{Legacy: true}).Addr())
	//lint:ignore SA1019 the legacy upgrade API is one of the admin-only calls a node must refuse
	_, err = legacy.MachineClient.Upgrade(ctx, &machine.UpgradeRequest{Image: "x"})
	check("legacy Upgrade", err, codes.Unimplemented)
}

// 1.14 serves ImageFactorySchematics and names extension layers; 1.13 and
// older number them and have no ImageFactorySchematics.
func TestServerImageFactorySchematics(t *testing.T) {
	sc := &schematic.Schematic{}
	sc.Customization.SystemExtensions.OfficialExtensions = []string{"siderolabs/newt"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	srv := Start(t, Options{Schematic: sc, FactoryURL: "http://127.0.0.1:8080"})
	c := insecureClient(t, srv.Addr())
	ifs, err := safe.StateGetByID[*talos114.ImageFactorySchematic](ctx, c.COSI, talos114.ImageFactorySchematicID)
	if err != nil {
		t.Fatal(err)
	}
	if s := ifs.TypedSpec(); s.SchematicID != srv.SchematicID() || s.APIURL != "http://127.0.0.1:8080" || s.Flavor != "Image Factory" {
		t.Errorf("ImageFactorySchematics = %+v", *s)
	}
	list, err := safe.StateListAll[*runtime.ExtensionStatus](ctx, c.COSI)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for es := range list.All() {
		ids = append(ids, es.Metadata().ID())
	}
	if strings.Join(ids, ",") != "0,1" {
		t.Errorf("1.14 extension IDs %q", ids)
	}

	old := insecureClient(t, Start(t, Options{Schematic: sc, TalosVersion: "v1.13.4"}).Addr())
	if _, err := safe.StateGetByID[*talos114.ImageFactorySchematic](ctx, old.COSI, talos114.ImageFactorySchematicID); err == nil {
		t.Error("a 1.13 node serves ImageFactorySchematics")
	}
}
