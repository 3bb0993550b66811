package node

import (
	"context"
	"crypto/rand"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// secretChars is what a fresh secret is made of: letters, digits and the
// punctuation passwords and headers carry (so no "looks random" rule can
// be what catches it).
const secretChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&*+-./:;<=>?@^_|~ "

func freshSecret(t testing.TB) string {
	b := make([]byte, 24)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(secretChars))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = secretChars[n.Int64()]
	}
	b[0], b[len(b)-1] = 'Q', 'z' // no leading/trailing space
	return string(b)
}

// place is where a test puts a secret: an existing scalar (replaced) or a
// mapping (a new key with the secret as its value, or as the key itself).
type place struct {
	node    *yaml.Node
	path    string
	addKey  bool
	asKey   bool // the new key's name is the secret
	kind    string
	newline bool // a multi-line secret (a block scalar)
}

// places lists every non-public scalar and every mapping of the documents.
func places(docs []*yaml.Node) []place {
	var out []place
	for _, doc := range docs {
		root := doc.Content[0]
		kind := scalarAt(root, "kind")
		if kind == "" {
			kind = v1alpha1Kind
		}
		var walk func(n *yaml.Node, path string)
		walk = func(n *yaml.Node, path string) {
			switch n.Kind {
			case yaml.MappingNode:
				out = append(out, place{node: n, path: path, addKey: true, kind: kind}, place{node: n, path: path, addKey: true, asKey: true, kind: kind})
				for i := 0; i+1 < len(n.Content); i += 2 {
					p := n.Content[i].Value
					if path != "" {
						p = path + "." + p
					}
					walk(n.Content[i+1], p)
				}
			case yaml.SequenceNode:
				for _, c := range n.Content {
					walk(c, path+"[]")
				}
			case yaml.ScalarNode:
				if fieldPublic(kind, path) == 0 && path != "kind" && path != "apiVersion" {
					out = append(out, place{node: n, path: path, kind: kind}, place{node: n, path: path, kind: kind, newline: true})
				}
			}
		}
		walk(root, "")
	}
	return out
}

// plant puts secret at p of the documents (edited in place).
func plant(p place, secret string) {
	v := secret
	if p.newline {
		v = secret[:12] + "\n" + secret[12:] + "\n"
	}
	if !p.addKey {
		p.node.Value, p.node.Tag, p.node.Style = v, "!!str", 0
		return
	}
	key, val := "x-"+strings.ToLower(secret[:3])+"-field", v
	if p.asKey {
		key, val = secret, "plain"
	}
	p.node.Content = append(p.node.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val})
}

func parseDocs(t testing.TB, data []byte) []*yaml.Node {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		if dec.Decode(&n) != nil {
			break
		}
		docs = append(docs, &n)
	}
	return docs
}

func encodeDocs(t testing.TB, docs []*yaml.Node) []byte {
	t.Helper()
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			t.Fatal(err)
		}
	}
	enc.Close()
	return []byte(b.String())
}

// freeText adds to a v1alpha1 config the maps and lists whose values the
// schema leaves free (headers, arguments, environment, sysctls), each with
// one entry: places where the node accepts any secret.
func freeText(t testing.TB, data []byte) []byte {
	docs := parseDocs(t, data)
	root := docs[0].Content[0]
	for _, e := range []struct {
		path  string
		value string
	}{
		{"machine.env", "HTTP_PROXY: a"},
		{"machine.sysctls", "net.a: b"},
		{"machine.install.extraKernelArgs", "[x=y]"},
		{"machine.kubelet.extraArgs", "node-labels: a"},
		{"machine.kubelet.extraConfig", "a: b"},
		{"machine.udev.rules", "[a]"},
		{"cluster.extraManifestHeaders", "X-A: b"},
		{"cluster.apiServer.extraArgs", "a: b"},
		{"cluster.proxy.extraArgs", "a: b"},
	} {
		var v yaml.Node
		if err := yaml.Unmarshal([]byte(e.value), &v); err != nil {
			t.Fatal(err)
		}
		n := root
		keys := strings.Split(e.path, ".")
		for i, k := range keys {
			var next *yaml.Node
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == k {
					next = n.Content[j+1]
				}
			}
			if next == nil && i < len(keys)-1 {
				break // only where the config has the section (1.14: no machine.install)
			}
			if next == nil {
				next = v.Content[0]
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, next)
			}
			n = next
		}
	}
	return encodeDocs(t, docs)
}

// realConfigs are the fixtures (Talos 1.13 and 1.14 configs), plus fresh
// ones from `talosctl gen config` when a talosctl v1.14 is on PATH.
func realConfigs(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, f := range []string{"worker.yaml", "controlplane.yaml", "worker-newt-esc.yaml", "worker-v114.yaml",
		// talosctl v1.14's configs (node/testdata/talos114): their 1.14 keys
		// are schema keys (talos114.Schema), their values still off the list.
		"talos114/valid/worker.yaml", "talos114/valid/controlplane.yaml", "talos114/user/worker.yaml", "talos114/user/controlplane.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = freeText(t, b)
	}
	if bin := testkit.Talosctl114(); bin != "" {
		dir := t.TempDir() // fresh throwaway PKI, as scripts/gen-talos114-fixtures.sh makes them
		cmd := exec.Command(bin, "gen", "config", "homelab", "https://192.168.1.20:6443", "--install-disk", "/dev/sda", "--output-dir", dir)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("talosctl gen config: %v: %s", err, msg)
		}
		for _, f := range []string{"worker.yaml", "controlplane.yaml"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			out["talosctl gen config "+f] = freeText(t, b)
		}
	} else {
		t.Log("no talosctl v1.14 on PATH: real v1.14 configs not generated, fixtures only")
	}
	return out
}

// Fresh random secrets under 20 random non-public key paths (replacing a
// value, as a new key's value or as a new key's name, one line or a block)
// of a real config: no 12-character piece of any shows in the node's dry
// run (diff, warnings) or refusal, or in the local checks. Rounds that the
// node accepts test the diff; the others its error messages.
func TestRedactionProperty(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{})
	for name, data := range realConfigs(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := Apply(context.Background(), ApplyOptions{Endpoint: srv.Addr(), Config: data, DryRun: true}); err != nil {
				t.Skipf("the fake node (machinery %s) refuses this config as it is: %v", MachineryVersion, err)
			}
			all := places(parseDocs(t, data))
			// The places the node accepts a secret at, one at a time: rounds
			// built from them reach the diff, not just a refusal.
			var accepted []int
			for i := range all {
				docs := parseDocs(t, data)
				plant(places(docs)[i], freshSecret(t))
				if _, err := Apply(context.Background(), ApplyOptions{Endpoint: srv.Addr(), Config: encodeDocs(t, docs), DryRun: true}); err == nil {
					accepted = append(accepted, i)
				}
			}
			if len(accepted) < 20 {
				t.Fatalf("only %d places accept a secret: the fixture is too small", len(accepted))
			}
			diffs, refusals := 0, 0
			for round := range 30 {
				pool := accepted
				if round%3 == 2 {
					pool = make([]int, len(all)) // anywhere: the node mostly refuses
					for i := range pool {
						pool[i] = i
					}
				}
				docs := parseDocs(t, data)
				ps := places(docs)
				var secrets []string
				for _, i := range mrand.Perm(len(pool))[:20] {
					s := freshSecret(t)
					plant(ps[pool[i]], s)
					secrets = append(secrets, s)
				}
				cfg := encodeDocs(t, docs)
				var outputs []string
				res, err := Apply(context.Background(), ApplyOptions{Endpoint: srv.Addr(), Config: cfg, DryRun: true})
				if err != nil {
					refusals++
					outputs = append(outputs, err.Error())
				} else {
					diffs++
					outputs = append(outputs, res.ModeDetails)
					outputs = append(outputs, res.Warnings...)
					for _, m := range res.Messages {
						outputs = append(outputs, m.ModeDetails)
					}
					if !strings.Contains(res.ModeDetails, "Config diff:") {
						t.Fatalf("no diff in the dry run:\n%s", res.ModeDetails)
					}
				}
				if c, err := LoadConfig(cfg); err != nil {
					outputs = append(outputs, err.Error())
				} else {
					outputs = append(outputs, c.Warnings...)
				}
				frags := nodetest.Fragments(secrets...)
				for _, out := range outputs {
					for _, f := range frags {
						if strings.Contains(out, f) {
							t.Fatalf("round %d: output shows %q:\n%s", round, f, out)
						}
					}
				}
			}
			t.Logf("%d places (%d accepted one at a time); 30 rounds: %d diffs, %d refusals", len(all), len(accepted), diffs, refusals)
			if diffs == 0 {
				t.Error("no round reached the diff")
			}
		})
	}
}
