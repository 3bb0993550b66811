package nodetest

import (
	"encoding/base64"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// SecretFragments returns every 12-character run of a talosconfig's key
// material (the base64 CA, certificate and key of each context, and the
// lines of their decoded PEM): none may ever show on an output.
func SecretFragments(talosconfig []byte) ([]string, error) {
	var cfg struct {
		Contexts map[string]struct{ CA, Crt, Key string }
	}
	if err := yaml.Unmarshal(talosconfig, &cfg); err != nil {
		return nil, fmt.Errorf("not a talosconfig")
	}
	var frags []string
	add := func(s string) {
		for i := 0; i+12 <= len(s); i++ {
			frags = append(frags, s[i:i+12])
		}
	}
	for _, c := range cfg.Contexts {
		for _, v := range []string{c.CA, c.Crt, c.Key} {
			add(v)
			pem, _ := base64.StdEncoding.DecodeString(v)
			for _, l := range strings.Split(string(pem), "\n") {
				if !strings.HasPrefix(l, "-----") {
					add(l)
				}
			}
		}
	}
	if len(frags) < 100 {
		return nil, fmt.Errorf("talosconfig holds no key material")
	}
	return frags, nil
}
