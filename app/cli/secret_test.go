package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// secretConfig is node/testdata/controlplane.yaml (with its newt
// ExtensionServiceConfig) with freshly generated fake key material in place
// of the placeholders: a real-looking EC CA key (PEM, base64 as in machine
// configs), a machine token and a cluster secret.
func secretConfig(t *testing.T) (cfg string, secrets []string) {
	t.Helper()
	base := testkit.Testdata(t, "controlplane.yaml")
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(k)
	keyB64 := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	raw := make([]byte, 16)
	rand.Read(raw)
	tok := hex.EncodeToString(raw)
	token := tok[:6] + "." + tok[6:22]
	rand.Read(raw)
	clusterSecret := base64.StdEncoding.EncodeToString(raw)

	s := string(base)
	s = strings.Replace(s, "token: fakeaa.fakeplaceholder00", "token: "+token, 1)
	s = strings.Replace(s, "key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tClJrRkxSUzFRVEVGRFJVaFBURVJGVWkxT1QxUXRRUzFTUlVGTUxVdEZXUT09Ci0tLS0tRU5EIEVDIFBSSVZBVEUgS0VZLS0tLS0K", "key: "+keyB64, 1)
	s = strings.Replace(s, "secret: RkFLRS1QTEFDRUhPTERFUi1DTFVTVEVSLVNFQ1JFVA==", "secret: "+clusterSecret, 1)
	if !strings.Contains(s, token) || !strings.Contains(s, keyB64) || !strings.Contains(s, clusterSecret) {
		t.Fatal("fixture placeholders changed; update secretConfig")
	}
	return s, []string{keyB64, token, clusterSecret}
}

// assertNoSecrets fails if out contains any 12-character piece of a secret.
func assertNoSecrets(t *testing.T, what, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		for i := 0; i+12 <= len(s); i++ {
			if strings.Contains(out, s[i:i+12]) {
				t.Fatalf("%s leaks secret fragment %q:\n%s", what, s[i:i+12], out)
			}
		}
	}
}

func TestApplyNeverPrintsSecrets(t *testing.T) {
	cfg, secrets := secretConfig(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "controlplane.yaml")
	os.WriteFile(good, []byte(cfg), 0o600)
	// A YAML error on the line holding the key, and an unknown field next to it.
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte(strings.Replace(cfg, "  ca:\n    crt:", "  ca:\n   crt:", 1)), 0o600)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte(strings.Replace(cfg, "  certSANs: []", "  certSANz: ["+secrets[1]+"]", 1)), 0o600)

	ok := nodetest.Start(t, nodetest.Options{})
	// A node whose error echoes part of the config back.
	echo := nodetest.Start(t, nodetest.Options{ApplyErr: status.Error(codes.InvalidArgument,
		"failed to parse config: token \""+secrets[1]+"\" invalid near key: "+secrets[0][:40])})

	runs := []struct {
		name string
		args []string
		code int
	}{
		{"success", []string{"apply", "--node", ok.Addr(), "--file", good, "--role", "controlplane", "--json"}, contract.ExitOK},
		{"role mismatch", []string{"apply", "--node", ok.Addr(), "--file", good, "--role", "worker"}, contract.ExitConfig},
		{"yaml error", []string{"apply", "--node", ok.Addr(), "--file", broken}, contract.ExitConfig},
		// a typo is a local warning; the 1.14 node's dry run refuses it (exit 8), nothing applied
		{"unknown field", []string{"apply", "--node", ok.Addr(), "--file", unknown}, contract.ExitApply},
		{"node echoes", []string{"apply", "--node", echo.Addr(), "--file", good, "--role", "controlplane"}, contract.ExitApply},
		{"closed port", []string{"apply", "--node", "127.0.0.1:1", "--file", good}, contract.ExitNetwork},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			code, stdout, stderr := cliRun(t, r.args...)
			if code != r.code {
				t.Fatalf("exit %d, want %d: %s", code, r.code, stderr)
			}
			assertNoSecrets(t, "stdout", stdout, secrets)
			assertNoSecrets(t, "stderr", stderr, secrets)
		})
	}
	// The node did get the real config, byte for byte, applied once (after its dry run).
	var applied []string
	for _, r := range ok.Requests() {
		if !r.DryRun {
			applied = append(applied, string(r.Config))
		}
	}
	if len(applied) != 1 || applied[0] != cfg {
		t.Fatalf("node applied %d configs; want the exact config once", len(applied))
	}
}
