package node_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// randomWord is a fresh word-like secret (letters and a digit or two), the
// shape a human password has: nothing "random-looking" to catch it by.
func randomWord(t testing.TB) string {
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	w := []byte{'H'}
	for _, c := range b[:7] {
		w = append(w, 'a'+c%26)
	}
	return string(append(w, '0'+b[8]%10))
}

// A value of the wrong type is quoted by the YAML decoder ("cannot
// construct !!str `hunter2x` into ..."): it is redacted whatever it looks
// like, locally and in the node's refusal.
func TestWrongTypeValueNeverEchoed(t *testing.T) {
	worker := string(readTestdata(t, "worker.yaml"))
	srv := nodetest.Start(t, nodetest.Options{})
	for _, secret := range []string{"hunter2x", "Hunter22", "Tr0ub4dor", randomWord(t), "12345678"} {
		cfg := strings.Replace(worker, "machine:\n", "machine:\n  registries:\n    config:\n      ghcr.io:\n        auth: "+secret+"\n", 1)
		_, err := node.LoadConfig([]byte(cfg))
		if !errors.Is(err, node.ErrInvalidConfig) {
			t.Fatalf("%s: LoadConfig err = %v, want invalid config", secret, err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("local error echoes the value: %v", err)
		}
		if !strings.Contains(err.Error(), "RegistryAuthConfig") {
			t.Errorf("local error lost its reason: %v", err)
		}
		_, err = node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte(cfg)})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("node error echoes the value: %v", err)
		}
	}
}

// A dry run's diff shows an ExtensionServiceConfig's keys and name, never
// its values: environment values, configFiles content (inline or block).
func TestDryRunDiffRedactsExtensionServiceValues(t *testing.T) {
	worker := string(readTestdata(t, "worker.yaml"))
	pw, envPW, blockPW, plainEnv := randomWord(t), randomWord(t), randomWord(t), randomWord(t)
	long := randomWord(t) + randomWord(t) + randomWord(t) // word-like, 27 chars: the 12-char fragment check applies
	pw += " " + long
	cfg := worker + "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: nut-client\nconfigFiles:\n" +
		"  - content: MONITOR ups@h 1 monuser " + pw + " secondary\n    mountPath: /usr/local/etc/nut/upsmon.conf\n" +
		"  - content: |\n      MONITOR ups@h 1 monuser " + blockPW + " secondary\n      SHUTDOWNCMD \"/sbin/poweroff\"\n    mountPath: /usr/local/etc/nut/other.conf\n" +
		"environment:\n  - NUT_PW=" + envPW + long + "\n  - UPS_PASSWORD=" + plainEnv + "\n"
	srv := nodetest.Start(t, nodetest.Options{})
	res, err := node.Apply(context.Background(), node.ApplyOptions{Endpoint: srv.Addr(), Config: []byte(cfg), DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	diff := res.ModeDetails
	for _, s := range []string{pw, envPW, blockPW, plainEnv, "monuser", "poweroff"} {
		if strings.Contains(diff, s) {
			t.Errorf("diff shows %q:\n%s", s, diff)
		}
	}
	assertNoSecret(t, diff, long, envPW+long)
	for _, want := range []string{"kind: ExtensionServiceConfig", "name: nut-client", "NUT_PW=<redacted>", "UPS_PASSWORD=<redacted>", "content: <redacted>", "configFiles:\n", "environment:\n", "mountPath: /usr/local/etc/nut/upsmon.conf", "type: worker"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
}
