package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestApplyDeliversExactConfigModeAndDryRun(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(generation(legacy), func(t *testing.T) {
			srv := nodetest.Start(t, nodetest.Options{Legacy: legacy, Warnings: []string{"use of deprecated field"}})
			cfg := readTestdata(t, "worker.yaml")
			ctx := context.Background()

			res, err := node.Apply(ctx, node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg, Mode: "try", TryTimeout: 90 * time.Second})
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			res2, err := node.Apply(ctx, node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg, DryRun: true})
			if err != nil {
				t.Fatalf("dry-run apply: %v", err)
			}

			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("server got %d requests, want 2", len(reqs))
			}
			if !bytes.Equal(reqs[0].Config, cfg) || !bytes.Equal(reqs[1].Config, cfg) {
				t.Fatal("config bytes received differ from the file")
			}
			if reqs[0].Mode != machine.ApplyConfigurationRequest_TRY || reqs[0].DryRun || reqs[0].TryTimeout != 90*time.Second {
				t.Errorf("request 1 = mode %v dry-run %v try-timeout %v, want TRY false 1m30s", reqs[0].Mode, reqs[0].DryRun, reqs[0].TryTimeout)
			}
			if reqs[1].Mode != machine.ApplyConfigurationRequest_AUTO || !reqs[1].DryRun || reqs[1].TryTimeout != 0 {
				t.Errorf("request 2 = mode %v dry-run %v try-timeout %v, want AUTO true 0", reqs[1].Mode, reqs[1].DryRun, reqs[1].TryTimeout)
			}
			if res.Mode != "try" || res.DryRun || len(res.Warnings) != 1 || res.Warnings[0] != "use of deprecated field" {
				t.Errorf("result = %+v", res)
			}
			if want := spki(t, srv.CertDER()); res.CertFingerprint != want {
				t.Errorf("cert fingerprint %s, want the server's %s", res.CertFingerprint, want)
			}
			if !res2.DryRun || !strings.HasPrefix(res2.ModeDetails, "Dry run summary:\n") {
				t.Fatalf("dry-run mode details = %q", res2.ModeDetails)
			}
			if legacy {
				if !strings.Contains(res2.ModeDetails, "Node is running in maintenance mode") || res.Messages[0].Mode != "" {
					t.Errorf("legacy: details %q, reply mode %q (want unset)", res2.ModeDetails, res.Messages[0].Mode)
				}
				return
			}
			// 1.13+: the summary and a diff; values of secret keys redacted, indentation kept.
			for _, want := range []string{"Applied configuration without a reboot (skipped in dry-run).", "Config diff:", "+machine:", "+    type: worker", "+        hostname: worker-1"} {
				if !strings.Contains(res2.ModeDetails, want) {
					t.Errorf("dry-run details lack %q:\n%s", want, res2.ModeDetails)
				}
			}
			assertNoSecret(t, res2.ModeDetails, "fakeaa.fakeplaceholder00", "RkFLRS1QTEFDRUhPTERFUi1DTFVTVEVSLVNFQ1JFVA==")
			if res.Messages[0].Mode != "try" || !strings.Contains(res.ModeDetails, "reverted back in 1m30s") {
				t.Errorf("try: reply mode %q details %q", res.Messages[0].Mode, res.ModeDetails)
			}
		})
	}
}

func generation(legacy bool) string {
	if legacy {
		return "talos-1.12"
	}
	return "talos-1.14"
}

// spki computes the fingerprint independently: base64(sha256(SubjectPublicKeyInfo)).
func spki(t *testing.T, der []byte) string {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func TestApplyPinnedFingerprint(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{SkipValidation: true})
	good := spki(t, srv.CertDER())
	if _, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("pinned"), CertFingerprints: []string{"other", good}}); err != nil {
		t.Fatalf("matching pin: %v", err)
	}
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("wrong pin"), CertFingerprints: []string{"AAAA" + good[4:]}, Timeout: 5 * time.Second})
	var ne *node.NetworkError
	if !errors.As(err, &ne) || ne.Kind != node.NetTLS || !strings.Contains(err.Error(), good) {
		t.Fatalf("wrong pin: err = %v, want a TLS error naming the node's fingerprint", err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || string(reqs[0].Config) != "pinned" {
		t.Fatalf("config reached the node despite the wrong pin: %d requests", len(reqs))
	}
}

// Every mode on both generations: what the node received and what it
// reports it did.
func TestApplyModes(t *testing.T) {
	want := map[string]machine.ApplyConfigurationRequest_Mode{
		"auto": machine.ApplyConfigurationRequest_AUTO, "reboot": machine.ApplyConfigurationRequest_REBOOT,
		"try": machine.ApplyConfigurationRequest_TRY, "no-reboot": machine.ApplyConfigurationRequest_NO_REBOOT,
		"staged": machine.ApplyConfigurationRequest_STAGED,
	}
	// reply mode per generation; "refused" = Unimplemented
	replies := map[bool]map[string]string{
		false: {"auto": "no-reboot", "reboot": "no-reboot", "try": "try", "no-reboot": "no-reboot", "staged": "staged"},
		true:  {"auto": "", "reboot": "", "try": "", "no-reboot": "refused", "staged": "refused"},
	}
	for _, legacy := range []bool{false, true} {
		t.Run(generation(legacy), func(t *testing.T) {
			srv := nodetest.Start(t, nodetest.Options{Legacy: legacy})
			cfg := readTestdata(t, "worker.yaml")
			for _, mode := range []string{"auto", "reboot", "try", "no-reboot", "staged"} {
				before := len(srv.Requests())
				res, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg, Mode: mode})
				got := srv.Requests()
				if len(got) != before+1 || got[len(got)-1].Mode != want[mode] {
					t.Fatalf("mode %s: server did not receive mode %v", mode, want[mode])
				}
				wantReply := replies[legacy][mode]
				if wantReply == "refused" {
					var re *node.RefusedError
					if !errors.As(err, &re) || !re.UnsupportedMode || re.Code != codes.Unimplemented || !errors.Is(err, node.ErrRefused) {
						t.Fatalf("mode %s: err = %v, want unsupported-mode RefusedError", mode, err)
					}
					if !strings.Contains(err.Error(), "auto, reboot or try") || !strings.Contains(err.Error(), mode) {
						t.Errorf("mode %s: message %q does not name the supported modes", mode, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("mode %s: %v", mode, err)
				}
				if res.Mode != mode || len(res.Messages) != 1 || res.Messages[0].Mode != wantReply {
					t.Errorf("mode %s: requested %q, node answered %q, want %q", mode, res.Mode, res.Messages[0].Mode, wantReply)
				}
				if !legacy && mode == "staged" && !strings.Contains(res.ModeDetails, "Staged configuration") {
					t.Errorf("staged: details %q", res.ModeDetails)
				}
			}
			if !slices.Equal(node.ModesFor(srv.TalosVersion()), map[bool][]string{false: {"auto", "reboot", "no-reboot", "try", "staged"}, true: {"auto", "reboot", "try"}}[legacy]) {
				t.Errorf("ModesFor(%s) = %v", srv.TalosVersion(), node.ModesFor(srv.TalosVersion()))
			}
		})
	}
	srv := nodetest.Start(t, nodetest.Options{SkipValidation: true})
	if _, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("x"), Mode: "sometimes"}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

// Talos 1.14 answers FailedPrecondition while another apply runs.
func TestApplyWhileApplying(t *testing.T) {
	gate := make(chan struct{})
	srv := nodetest.Start(t, nodetest.Options{Gate: gate})
	cfg := readTestdata(t, "worker.yaml")
	first := make(chan error, 1)
	go func() {
		_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg})
		first <- err
	}()
	for len(srv.Requests()) == 0 { // the first call is inside the node, holding the apply lock
		runtime.Gosched()
	}
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg})
	var re *node.RefusedError
	if !errors.As(err, &re) || re.Code != codes.FailedPrecondition || !strings.Contains(err.Error(), "another apply configuration is already in progress") {
		t.Fatalf("second apply: %v", err)
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatalf("first apply: %v", err)
	}
}

// Configs as talosctl gen config v1.14 makes them (generated by the
// talosctl v1.14 (scripts/gen-talos114-fixtures.sh), with the user's patches and without the ones rc.1
// refuses) reach a 1.14 node byte for byte; a 1.12 node refuses the kinds
// it does not know, and says so.
func TestApplyNewerConfig(t *testing.T) {
	for _, name := range []string{"talos114/valid/worker.yaml", "talos114/valid/controlplane.yaml", "talos114/user/worker.yaml"} {
		cfg := readTestdata(t, name)
		srv := nodetest.Start(t, nodetest.Options{})
		if _, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: cfg}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if reqs := srv.Requests(); len(reqs) != 1 || !bytes.Equal(reqs[0].Config, cfg) {
			t.Fatalf("%s: the node did not receive the file byte for byte", name)
		}
		old := nodetest.Start(t, nodetest.Options{Legacy: true})
		_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: old.Addr(), Config: cfg})
		var re *node.RefusedError
		if !errors.As(err, &re) || re.Code != codes.Unknown || !strings.Contains(err.Error(), "not registered") {
			t.Fatalf("1.12 node: %v", err)
		}
	}
}

// The hand-written worker-v114.yaml has both an UnattendedInstallConfig and
// .machine.install: a 1.14 node refuses it with its message.
func TestApplyNode114RefusesInstallConflict(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{})
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: readTestdata(t, "worker-v114.yaml")})
	var re *node.RefusedError
	if !errors.As(err, &re) || re.Code != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)") {
		t.Fatalf("err = %v", err)
	}
}

func TestApplyNodeRefusesConfig(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{ApplyErr: status.Error(codes.InvalidArgument, "configuration validation failed: 1 error occurred: install disk or diskSelector should be defined")})
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: readTestdata(t, "worker.yaml")})
	var re *node.RefusedError
	if !errors.As(err, &re) || re.Code != codes.InvalidArgument || !errors.Is(err, node.ErrRefused) || errors.Is(err, node.ErrNetwork) {
		t.Fatalf("err = %#v", err)
	}
	want := "node refused the config: configuration validation failed: 1 error occurred: install disk or diskSelector should be defined"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to contain %q", err, want)
	}
}

func TestApplyServerSideValidation(t *testing.T) {
	// Without injected errors the fake node loads the config like Talos does.
	srv := nodetest.Start(t, nodetest.Options{})
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("apiVersion: v1alpha1\nkind: NoSuchConfig\n")})
	if !errors.Is(err, node.ErrRefused) || !strings.Contains(err.Error(), "NoSuchConfig") {
		t.Fatalf("err = %v, want a refusal naming the unknown kind", err)
	}
}

func TestApplyServerErrorIsSanitized(t *testing.T) {
	key, token := fakeKeyMaterial(t)
	srv := nodetest.Start(t, nodetest.Options{ApplyErr: status.Errorf(codes.InvalidArgument, "bad value %q near\n%s", token, key)})
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("x")})
	if err == nil {
		t.Fatal("no error")
	}
	assertNoSecret(t, err.Error(), key, token)
}

func TestApplyConnectionRefused(t *testing.T) {
	addr := testkit.ClosedAddr(t)

	start := time.Now()
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: addr, Config: []byte("x"), Timeout: 5 * time.Second})
	var ne *node.NetworkError
	if !errors.As(err, &ne) || ne.Kind != node.NetRefused || !errors.Is(err, node.ErrNetwork) {
		t.Fatalf("err = %v, want connection refused", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("refused connection took %v", time.Since(start))
	}
}

// A port that answers with something other than TLS.
func TestApplyTLSFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	_, err = node.Apply(context.Background(), node.ApplyOptions{Endpoint: lis.Addr().String(), Config: []byte("x"), Timeout: 5 * time.Second})
	var ne *node.NetworkError
	if !errors.As(err, &ne) || ne.Kind != node.NetTLS || !errors.Is(err, node.ErrNetwork) {
		t.Fatalf("err = %v, want TLS failure", err)
	}
}

func TestApplyTimeout(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Delay: 20 * time.Second})
	start := time.Now()
	_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("x"), Timeout: 300 * time.Millisecond})
	var ne *node.NetworkError
	if !errors.As(err, &ne) || ne.Kind != node.NetTimeout || !errors.Is(err, node.ErrNetwork) {
		t.Fatalf("err = %v, want timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if !strings.Contains(err.Error(), "300ms") {
		t.Errorf("message %q does not say the timeout", err)
	}
}

func TestApplyCancelled(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Delay: 20 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := node.Apply(ctx, node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("x")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestNormalizeEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"192.168.1.20":       "192.168.1.20:50000",
		"192.168.1.20:50001": "192.168.1.20:50001",
		"talos-cp":           "talos-cp:50000",
		"fd00::5":            "[fd00::5]:50000",
		"[fd00::5]:1234":     "[fd00::5]:1234",
		"https://10.0.0.2":   "10.0.0.2:50000",
	} {
		got, err := node.NormalizeEndpoint(in)
		if err != nil || got != want {
			t.Errorf("NormalizeEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1.2.3.4:0", "1.2.3.4:99999", "10.0.0.0/24", "127.0.0.6:notaport", "https://user:pw123secret@h", "user:pw123secret@10.0.0.1:50000", "evil\x1b[2J"} {
		_, err := node.NormalizeEndpoint(bad)
		if err == nil {
			t.Errorf("NormalizeEndpoint(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "pw123secret") || strings.Contains(err.Error(), "\x1b") {
			t.Errorf("NormalizeEndpoint(%q) error echoes it: %q", bad, err)
		}
	}
}

// A node that asks for a client certificate already has a config: the
// maintenance client must abort the handshake and never send the config.
// The same for a server that asks for one but would accept none.
func TestApplyConfiguredNodeNeverGetsConfig(t *testing.T) {
	for _, opts := range []nodetest.Options{{Configured: true}, {RequestClientCert: true, SkipValidation: true}} {
		srv := nodetest.Start(t, opts)
		_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte("secret"), Timeout: 5 * time.Second})
		var ne *node.NetworkError
		if !errors.As(err, &ne) || ne.Kind != node.NetTLS || !strings.Contains(err.Error(), "client certificate") {
			t.Errorf("%+v: err = %v, want TLS failure naming the client certificate", opts, err)
		}
		if reqs := srv.Requests(); len(reqs) != 0 {
			t.Errorf("%+v: server received %d ApplyConfiguration calls", opts, len(reqs))
		}
	}
}

// Every node error path, both generations, with fresh key material: the
// node's own messages (loader dumps of unknown keys with their values,
// validation errors, URLs with userinfo) never reach the user unredacted.
func TestApplyNodeErrorsAreRedacted(t *testing.T) {
	worker := string(readTestdata(t, "worker.yaml"))
	for _, legacy := range []bool{false, true} {
		t.Run(generation(legacy), func(t *testing.T) {
			key, token := fakeKeyMaterial(t)
			// a Talos-style token of lowercase letters only: no "random"-looking shape to catch
			letters := make([]byte, 23)
			for i := range letters {
				letters[i] = 'a' + token[i]%26
			}
			letters[6] = '.'
			wordToken := string(letters)
			password := "pw" + string(letters[7:]) // word-like too
			cases := map[string]string{
				"unknown key, word token": strings.Replace(worker, "  token: fakeaa.fakeplaceholder00", "  tokn: "+wordToken, 1),
				// a misspelled key holding a secret: the node's loader dumps "machine: tokn: <value>"
				"unknown key":          strings.Replace(worker, "  token: fakeaa.fakeplaceholder00", "  tokn: "+token, 1),
				"unknown key with PEM": strings.Replace(worker, "  certSANs: []", "  certSANz: |\n"+indent(key, "    "), 1),
				// validation error quoting a URL with userinfo
				"endpoint with password": strings.Replace(worker, "endpoint: https://192.168.1.10:6443", "endpoint: https://admin:"+password+"@192.168.1.10:bad", 1),
			}
			srv := nodetest.Start(t, nodetest.Options{Legacy: legacy})
			for name, cfg := range cases {
				_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte(cfg)})
				var re *node.RefusedError
				if !errors.As(err, &re) {
					t.Fatalf("%s: err = %v, want the node's refusal", name, err)
				}
				assertNoSecret(t, err.Error(), key, token, password, wordToken)
				t.Logf("%s: %v", name, err)
			}
			// A node message that is itself a URL with userinfo.
			srv2 := nodetest.Start(t, nodetest.Options{Legacy: legacy, ApplyErr: status.Errorf(codes.InvalidArgument, "failed to fetch https://user:%s@registry.example/v2/: 401", password)})
			_, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv2.Addr(), Config: []byte(worker)})
			if err == nil || !strings.Contains(err.Error(), "https://<redacted>@") {
				t.Fatalf("userinfo: %v", err)
			}
			assertNoSecret(t, err.Error(), password)
		})
	}
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pre + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
