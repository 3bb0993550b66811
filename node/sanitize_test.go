package node

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
)

// A dry run's config diff keeps what the user needs to check it (keys,
// public image references, plain values) and drops every secret value.
func TestSanitizeLinesDiff(t *testing.T) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	token := base64.StdEncoding.EncodeToString(raw)
	installer := "factory.talos.dev/metal-installer/ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9:v1.14.5"
	diff := strings.Join([]string{
		"--- a", "+++ b", "@@ -0,0 +1,9 @@",
		"+machine:",
		"+    token: " + token,
		"+    ca:",
		"+        key: " + token,
		"+    kubelet:",
		"+        image: ghcr.io/siderolabs/kubelet:v1.34.1",
		"+        defaultRuntimeSeccompProfileEnabled: true",
		"+    install:",
		"+        image: " + installer,
		"+        disk: /dev/mmcblk0",
		"+    image: " + token, // not an image reference: a secret in the wrong place
		"+        - NEWT_SECRET=" + token,
		"+cluster:",
		"+    controlPlane:",
		"+        endpoint: https://192.168.1.10:6443",
		"+        other: https://user:" + token + "@host:6443",
		"+        withQuery: https://host/x?token=" + token,
		"+    secretboxEncryptionSecret: " + token,
	}, "\n")
	got := sanitizeLines(diff)
	for _, want := range []string{
		"+        image: ghcr.io/siderolabs/kubelet:v1.34.1",
		"+        defaultRuntimeSeccompProfileEnabled: true",
		"+        image: " + installer,
		"+        disk: /dev/mmcblk0",
		"+        endpoint: https://192.168.1.10:6443",
		"+    token: <redacted>",
		"+    secretboxEncryptionSecret: <redacted>",
	} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	for i := 0; i+12 <= len(token); i++ {
		if strings.Contains(got, token[i:i+12]) {
			t.Fatalf("diff leaks the token:\n%s", got)
		}
	}
}

// Block scalars anywhere (file contents, manifests, "- |" items) show as one
// redacted line per block; the structure around them stays.
func TestSanitizeLinesBlockScalars(t *testing.T) {
	secret := "Zq" + strings.Repeat("x", 3) + "pw1"
	diff := strings.Join([]string{
		"+machine:",
		"+    files:",
		"+        - content: |",
		"+            [plugins]",
		"+              password = \"" + secret + "\"",
		"+          path: /etc/cri/conf.d/20-customization.part",
		"+        - op: create",
		"+    certSANs:",
		"+        - |",
		"+          " + secret,
		"+          " + secret,
		"+        - plain.example.com",
	}, "\n")
	got := sanitizeLines(diff)
	want := strings.Join([]string{
		"+machine:",
		"+    files:",
		"+        - content: |",
		"+            <redacted>",
		"+          path: /etc/cri/conf.d/20-customization.part",
		"+        - op: create",
		"+    certSANs:",
		"+        - |",
		"+          <redacted>",
		"+        - plain.example.com",
	}, "\n")
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
