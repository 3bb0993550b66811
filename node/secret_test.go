package node_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
)

// fakeKeyMaterial makes throw-away key material for leak tests: a freshly
// generated EC private key in PEM and a random base64 token. Nothing here is
// a real secret; it only has to look like one.
func fakeKeyMaterial(t testing.TB) (pemKey, token string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pemKey = string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	raw := make([]byte, 32)
	rand.Read(raw)
	return pemKey, base64.StdEncoding.EncodeToString(raw)
}

// assertNoSecret fails if msg contains any 12-character piece of a secret
// (so partial echoes count too) or PEM armor.
func assertNoSecret(t testing.TB, msg string, secrets ...string) {
	t.Helper()
	if strings.Contains(msg, "PRIVATE KEY") || strings.Contains(msg, "-----BEGIN") {
		t.Errorf("message contains PEM armor: %q", msg)
	}
	for _, s := range secrets {
		for _, line := range strings.Split(s, "\n") {
			for i := 0; i+12 <= len(line); i++ {
				if strings.Contains(msg, line[i:i+12]) {
					t.Errorf("message leaks secret fragment %q: %q", line[i:i+12], msg)
					return
				}
			}
		}
	}
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
