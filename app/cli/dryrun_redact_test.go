package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The values issue 20 found printed whole by `apply --dry-run` (text and
// --json): a header value with punctuation, a Basic credential, a kubelet
// extraArg value with punctuation and a key named like a token. None may
// show, in any 12-character piece, whatever it looks like.
func TestDryRunNeverPrintsConfigValues(t *testing.T) {
	base := testkit.Testdata(t, "worker.yaml")
	header := `p@ss#Wd!9Lk$2Qz%8Rt&4Yh`
	basic := "Basic dXNlcjpwYXNzMTI"
	argVal := "x;y=Qm4!tR7#pL2&vZ9@kW"
	tokenKey := "tkn_9fQ2mZ7xLp4vR8sW3nB6"
	cfg := strings.Replace(string(base), "  kubelet:\n", "  kubelet:\n    extraArgs:\n      node-labels: '"+argVal+"'\n      "+tokenKey+": plain\n", 1)
	cfg = strings.Replace(cfg, "cluster:\n", "cluster:\n  extraManifestHeaders:\n    X-Api: \""+header+"\"\n    Authorization2: "+basic+"\n", 1)
	file := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := nodetest.Start(t, nodetest.Options{})
	secrets := []string{header, "dXNlcjpwYXNzMTI", argVal, tokenKey}
	for _, args := range [][]string{
		{"apply", "--node", srv.Addr(), "--file", file, "--dry-run"},
		{"apply", "--node", srv.Addr(), "--file", file, "--dry-run", "--json"},
	} {
		code, stdout, stderr := cliRun(t, args...)
		if code != contract.ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(stdout, "extraManifestHeaders") || !strings.Contains(stdout, "hostname: worker-1") {
			t.Errorf("%v: the diff lost its structure or public values:\n%s", args, stdout)
		}
		assertNoSecrets(t, "stdout", stdout, secrets)
		assertNoSecrets(t, "stderr", stderr, secrets)
		for _, s := range []string{"Basic", "dXNlcjpw"} {
			if strings.Contains(stdout, s) {
				t.Errorf("%v: stdout shows %q:\n%s", args, s, stdout)
			}
		}
	}
}
