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

// ConfigSecretFragments returns every 12-character run of a machine
// config's secrets (every YAML document): the values under keys naming key
// material (key, crt, ca, token, secret, pem...; base64 PEM decoded too,
// multi-line PEM line by line) and the values of environment entries whose
// name holds SECRET, TOKEN, KEY or PASSWORD (an ExtensionServiceConfig's
// NEWT_SECRET). None may ever show on an output.
func ConfigSecretFragments(config []byte) ([]string, error) {
	var frags []string
	add := func(s string) {
		for _, l := range strings.Split(s, "\n") {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "-----") {
				continue
			}
			for i := 0; i+12 <= len(l); i++ {
				frags = append(frags, l[i:i+12])
			}
		}
		if pem, err := base64.StdEncoding.DecodeString(s); err == nil && strings.Contains(string(pem), "-----BEGIN") {
			for _, l := range strings.Split(string(pem), "\n") {
				if !strings.HasPrefix(l, "-----") {
					for i := 0; i+12 <= len(l); i++ {
						frags = append(frags, l[i:i+12])
					}
				}
			}
		}
	}
	secretKey := func(k string) bool {
		k = strings.ToLower(k)
		for _, w := range []string{"key", "crt", "ca", "token", "secret", "pem", "cert"} {
			if strings.Contains(k, w) {
				return true
			}
		}
		return false
	}
	secretEnv := func(v string) (string, bool) {
		name, val, ok := strings.Cut(v, "=")
		u := strings.ToUpper(name)
		return val, ok && (strings.Contains(u, "SECRET") || strings.Contains(u, "TOKEN") || strings.Contains(u, "KEY") || strings.Contains(u, "PASSWORD"))
	}
	var walk func(n *yaml.Node, underSecret bool)
	walk = func(n *yaml.Node, underSecret bool) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				if c.Kind == yaml.ScalarNode {
					if v, ok := secretEnv(c.Value); ok {
						add(v)
						continue
					}
				}
				walk(c, underSecret)
			}
		case yaml.MappingNode:
			for j := 0; j+1 < len(n.Content); j += 2 {
				walk(n.Content[j+1], underSecret || secretKey(n.Content[j].Value))
			}
		case yaml.ScalarNode:
			if underSecret && len(n.Value) >= 12 {
				add(n.Value)
			}
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(config)))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			break
		}
		walk(&n, false)
	}
	if len(frags) < 100 {
		return nil, fmt.Errorf("config holds no key material")
	}
	return frags, nil
}
