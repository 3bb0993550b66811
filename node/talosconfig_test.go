package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/node/nodetest"
)

func TestParseTalosconfigErrorsHoldNoSecrets(t *testing.T) {
	pki := newPKI(t)
	good, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ParseTalosconfig(good, "")
	if err != nil || tc.Context != "home" || !tc.IsAdmin() || len(tc.Endpoints) != 1 {
		t.Fatalf("good config: %+v, %v", tc, err)
	}
	if s := tc.String(); strings.Contains(s, "LS0t") {
		t.Fatalf("String shows key material: %s", s)
	}
	text := string(good)
	keyLine := text[strings.Index(text, "key: "):]
	keyLine = keyLine[:strings.Index(keyLine, "\n")]
	cases := map[string]struct {
		data    string
		context string
		want    string
	}{
		"unknown context": {text, "prod", `no context "prod" (contexts: home)`},
		"key not base64":  {strings.Replace(text, keyLine, keyLine[:40]+"!!!"+keyLine[40:], 1), "", "not base64"},
		"key mismatched":  {strings.Replace(text, keyLine, "key: "+strings.TrimPrefix(keyLine, "key: ")[8:], 1), "", "client certificate and key: tls: failed to find any PEM data"},
		"yaml broken":     {strings.Replace(text, keyLine, keyLine+"\n  - [", 1), "", "not a valid talosconfig YAML"},
		"no certificate":  {strings.Replace(text, keyLine, "", 1), "", "has no client certificate"},
		"omni": {"context: omni\ncontexts:\n  omni:\n    endpoints: [https://x.omni.siderolabs.io]\n    auth:\n      siderov1:\n        identity: me@example.com\n", "",
			"Omni/SideroV1"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTalosconfig([]byte(c.data), c.context)
			if !errors.Is(err, ErrTalosconfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			assertNoSecret(t, good, err.Error())
		})
	}
}

// The client certificate's roles (its Organization, any string a CA put
// there: the talosconfig may be someone else's) are kept escaped: the
// CLI's and the app's "not os:admin" warnings printed them raw.
func TestTalosconfigRolesEscaped(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.Talosconfig("home", "os:reader\x1b[2J\u202e", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ParseTalosconfig(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Roles) != 1 || tc.Roles[0] != `os:reader\x1b[2J\u202e` || tc.IsAdmin() {
		t.Fatalf("roles %q", tc.Roles)
	}
	admin, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := ParseTalosconfig(admin, ""); err != nil || !tc.IsAdmin() {
		t.Fatalf("os:admin: %v %v", tc, err)
	}
}
