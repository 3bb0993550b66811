package node

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/node/nodetest"
)

func userControlPlane(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/talos114/valid/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newtEnvPatch is the user's patch: Newt's environment with the new endpoint.
const newtEnvPatch = `apiVersion: v1alpha1
kind: ExtensionServiceConfig
name: newt
environment:
    - PANGOLIN_ENDPOINT=https://pangolin2.example.net
    - NEWT_ID=n3wt1d0000000043
    - NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp2
`

// The Newt environment patch grows the existing list (merge.go appends
// slices): flagged with the form that replaces it, the result as
// configpatcher makes it, the diff redacted.
func TestPatchFlagsAppendToExistingList(t *testing.T) {
	cur := userControlPlane(t)
	res, err := PatchConfig(cur, [][]byte{[]byte(newtEnvPatch)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Appends) != 1 {
		t.Fatalf("appends %+v", res.Appends)
	}
	a := res.Appends[0]
	if a.Document() != "ExtensionServiceConfig newt" || a.Path != "environment" || a.Before != 3 || a.After != 6 {
		t.Fatalf("append %+v", a)
	}
	for _, w := range []string{"kind: ExtensionServiceConfig\nname: newt\n$patch: delete\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n",
		"talosflash patch --replace-document ExtensionServiceConfig/newt FILE"} {
		if !strings.Contains(a.Replace, w) {
			t.Errorf("replace form lacks %q:\n%s", w, a.Replace)
		}
	}
	// What is sent: the six entries, the 1.14 documents byte for byte.
	cfg, err := LoadConfig(res.Config)
	if err != nil {
		t.Fatalf("patched config: %v", err)
	}
	if !cfg.HasExtensionService("newt") || strings.Count(string(res.Config), "PANGOLIN_ENDPOINT=") != 2 {
		t.Fatalf("patched config:\n%s", res.Config)
	}
	kubelet := cur[bytes.Index(cur, []byte("kind: KubeletConfig")):]
	kubelet = kubelet[:bytes.Index(kubelet, []byte("\n---"))]
	if !bytes.Contains(res.Config, kubelet) {
		t.Fatal("the KubeletConfig document was not kept byte for byte")
	}
	if !res.Changed || !strings.Contains(res.Diff, "+    - PANGOLIN_ENDPOINT=<redacted>") || !strings.Contains(res.Diff, "--- ExtensionServiceConfig newt") {
		t.Fatalf("diff:\n%s", res.Diff)
	}
	assertNoConfigSecrets(t, cur, res.Diff, a.Replace)
	if strings.Contains(res.Diff+a.Replace, "N3wS3cr3tV4lu3Xq8Zp2") || strings.Contains(res.Diff+a.Replace, "pangolin2") {
		t.Fatalf("the patch's values show:\n%s\n%s", res.Diff, a.Replace)
	}
}

// The replace form the flag proposes, filled in, replaces the list: no
// append, exactly the new entries.
func TestPatchReplaceFormReplaces(t *testing.T) {
	cur := userControlPlane(t)
	p := "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n$patch: delete\n---\n" + newtEnvPatch
	res, err := PatchConfig(cur, [][]byte{[]byte(p)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Appends) != 0 || strings.Count(string(res.Config), "PANGOLIN_ENDPOINT=") != 1 || bytes.Contains(res.Config, []byte("pangolin.example.net")) {
		t.Fatalf("appends %+v; config:\n%s", res.Appends, res.Config)
	}
}

// --replace-document swaps the whole document in one change; an
// unchanged config is no change; a merge into a 1.14 document is refused
// with what to do; a 1.14 document can be deleted.
func TestPatchReplaceDeleteAndUnsupported(t *testing.T) {
	cur := userControlPlane(t)
	res, err := PatchConfig(cur, nil, []Replacement{{Kind: "ExtensionServiceConfig", Name: "newt", Document: []byte(newtEnvPatch)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Appends) != 0 || strings.Count(string(res.Config), "PANGOLIN_ENDPOINT=") != 1 || !bytes.Contains(res.Config, []byte("NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp2")) {
		t.Fatalf("replace: %+v\n%s", res.Appends, res.Config)
	}
	if _, err := PatchConfig(cur, nil, []Replacement{{Kind: "ExtensionServiceConfig", Name: "cloudflared", Document: []byte(newtEnvPatch)}}); err == nil ||
		!strings.Contains(err.Error(), "must hold exactly that one document") {
		t.Fatalf("mismatched replacement: %v", err)
	}

	same, err := PatchConfig(cur, [][]byte{[]byte("machine:\n    type: controlplane\n")}, nil)
	if err != nil || same.Changed || same.Diff != "No changes." {
		t.Fatalf("no-op patch: changed %v diff %q err %v", same != nil && same.Changed, same.Diff, err)
	}

	_, err = PatchConfig(cur, [][]byte{[]byte("apiVersion: v1alpha1\nkind: KubeletConfig\nextraArgs:\n    v: \"2\"\n")}, nil)
	if !errors.Is(err, ErrPatchUnsupported) || !strings.Contains(err.Error(), "--replace-document \"KubeletConfig\"") {
		t.Fatalf("merge into a 1.14 kind: %v", err)
	}

	del, err := PatchConfig(cur, [][]byte{[]byte("apiVersion: v1alpha1\nkind: KubePrismConfig\n$patch: delete\n")}, nil)
	if err != nil || bytes.Contains(del.Config, []byte("kind: KubePrismConfig")) || !strings.Contains(del.Diff, "-kind: KubePrismConfig") {
		t.Fatalf("delete a 1.14 document: %v\n%s", err, del.Diff)
	}
	if _, err := PatchConfig(cur, [][]byte{[]byte(`[{"op": "add", "path": "/machine/certSANs/-", "value": "x"}]`)}, nil); err == nil ||
		!strings.Contains(err.Error(), "JSON6902 patches are not supported for multi-document") {
		t.Fatalf("JSON patch on a multi-document config: %v", err)
	}
	if _, err := PatchConfig(cur, [][]byte{[]byte("machine:\n    nosuchfield: S3cr3tN3wtV4lu3zz9Qk7\n")}, nil); !errors.Is(err, ErrPatch) || strings.Contains(err.Error(), "S3cr3tN3wt") {
		t.Fatalf("bad patch: %v", err)
	}
}

// A v1alpha1 list: the replace form nests the keys.
func TestPatchV1alpha1ListAppend(t *testing.T) {
	cur := []byte("version: v1alpha1\nmachine:\n    type: worker\n    certSANs: [a.example.com]\ncluster:\n    clusterName: c\n")
	res, err := PatchConfig(cur, [][]byte{[]byte("machine:\n    certSANs: [b.example.com]\n")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Appends) != 1 || res.Appends[0].Path != "machine.certSANs" ||
		!strings.HasPrefix(res.Appends[0].Replace, "replace the list instead of appending to it, in one patch file:\nmachine:\n    certSANs:\n        $patch: delete\n---\nmachine:\n    certSANs:\n        - ...\n") {
		t.Fatalf("%+v", res.Appends)
	}
	if !strings.Contains(res.Diff, "+        - b.example.com") {
		t.Fatalf("diff:\n%s", res.Diff)
	}
}

func assertNoConfigSecrets(t *testing.T, cfg []byte, outputs ...string) {
	t.Helper()
	frags, err := nodetest.ConfigSecretFragments(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		for _, f := range frags {
			if strings.Contains(o, f) {
				t.Fatalf("output holds secret fragment %q:\n%s", f, o)
			}
		}
	}
}

// A delete of a document the config lacks (the same delete run twice, a
// patch for every node of which only one has the document, another
// apiVersion) is skipped, as talosctl 1.14's strategic merge skips it
// (configpatcher/strategic.go, siderolabs/talos c3052e845); machinery
// v1.13 appended the selector and its encoder panicked, crashing the CLI.
// The rest of such a patch still applies.
func TestPatchDeleteOfAbsentDocumentSkipped(t *testing.T) {
	cur := userControlPlane(t)
	for _, p := range []string{
		"apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: cloudflared\n$patch: delete\n",
		"apiVersion: v1alpha2\nkind: ExtensionServiceConfig\nname: newt\n$patch: delete\n",
		"apiVersion: v1alpha1\nkind: KubeFlannelCNIConfig\n$patch: delete\n",
	} {
		res, err := PatchConfig(cur, [][]byte{[]byte(p)}, nil)
		if err != nil || res.Changed {
			t.Fatalf("delete of an absent document %q: changed %v, %v", p, res != nil && res.Changed, err)
		}
	}
	// A key's delete in an absent document: the delete skipped, the rest
	// of the document (its name) added, as talosctl 1.14 does; the node's
	// validation decides on it.
	if _, err := PatchConfig(cur, [][]byte{[]byte("apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: cloudflared\nenvironment:\n    $patch: delete\n")}, nil); err != nil {
		t.Fatalf("a key's delete in an absent document: %v", err)
	}
	// Deleted by the first patch, deleted again by the second; the third changes something.
	del := "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n$patch: delete\n"
	res, err := PatchConfig(cur, [][]byte{[]byte(del), []byte(del), []byte("machine:\n    certSANs: [cp.example.com]\n")}, nil)
	if err != nil || bytes.Contains(res.Config, []byte("kind: ExtensionServiceConfig")) || !bytes.Contains(res.Config, []byte("cp.example.com")) {
		t.Fatalf("delete twice, then a change: %v", err)
	}
	// A replacement of a document the config lacks adds it.
	cf := "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: cloudflared\nenvironment:\n    - TUNNEL_TOKEN=t0k3nV4lu3\n"
	res, err = PatchConfig(cur, nil, []Replacement{{Kind: "ExtensionServiceConfig", Name: "cloudflared", Document: []byte(cf)}})
	if err != nil || !bytes.Contains(res.Config, []byte("name: cloudflared")) || !bytes.Contains(res.Config, []byte("name: newt")) {
		t.Fatalf("replacement of an absent document: %v", err)
	}
}

// What is flagged is what each patch document did to the config as it
// stood before it: the replace form the flag proposes (a delete, then the
// list) is no append even when the new list is longer, for the v1alpha1
// document, a named document and --replace-document alike; a list
// replaced by one patch and grown by the next is flagged once, for the
// second, counted from the list it grew; a list inside a list item merged
// by key (an interface's addresses) that grows is flagged, with how to
// replace the item instead.
func TestPatchAppendsPerDocument(t *testing.T) {
	v1 := []byte("version: v1alpha1\nmachine:\n    type: worker\n    certSANs: [x.example.com, y.example.com]\n    network:\n        interfaces:\n" +
		"            - interface: end0\n              addresses: [10.0.0.2/24]\ncluster:\n    clusterName: c\n")
	esc := "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n"
	longer := esc + "environment:\n    - PANGOLIN_ENDPOINT=https://p.example.net\n    - NEWT_ID=n3wt1d\n    - NEWT_SECRET=N3wS3cr3tQq\n    - LOG_LEVEL=DEBUG\n"
	for name, c := range map[string]struct {
		cur     []byte
		patches []string
		repl    []Replacement
	}{
		"v1alpha1 list replaced by a longer one": {v1, []string{"machine:\n    certSANs:\n        $patch: delete\n---\nmachine:\n    certSANs: [a.example.com, b.example.com, c.example.com]\n"}, nil},
		"named document replaced, longer":        {userControlPlane(t), []string{esc + "$patch: delete\n---\n" + longer}, nil},
		"--replace-document, longer":             {userControlPlane(t), nil, []Replacement{{Kind: "ExtensionServiceConfig", Name: "newt", Document: []byte(longer)}}},
	} {
		var ps [][]byte
		for _, p := range c.patches {
			ps = append(ps, []byte(p))
		}
		res, err := PatchConfig(c.cur, ps, c.repl)
		if err != nil || len(res.Appends) != 0 {
			t.Fatalf("%s: %v, appends %+v", name, err, res.Appends)
		}
	}

	res, err := PatchConfig(v1, [][]byte{
		[]byte("machine:\n    certSANs:\n        $patch: delete\n---\nmachine:\n    certSANs: [a.example.com]\n"),
		[]byte("machine:\n    certSANs: [b.example.com, c.example.com]\n"),
	}, nil)
	if err != nil || len(res.Appends) != 1 || res.Appends[0].Path != "machine.certSANs" || res.Appends[0].Before != 1 || res.Appends[0].After != 3 {
		t.Fatalf("replaced, then grown: %v, appends %+v", err, res.Appends)
	}

	res, err = PatchConfig(v1, [][]byte{[]byte("machine:\n    network:\n        interfaces:\n            - interface: end0\n              addresses: [10.0.0.3/24]\n")}, nil)
	if err != nil || len(res.Appends) != 1 {
		t.Fatalf("nested list: %v, appends %+v", err, res.Appends)
	}
	a := res.Appends[0]
	if a.Path != "machine.network.interfaces[0].addresses" || a.Before != 1 || a.After != 2 ||
		!strings.Contains(a.Replace, "        interfaces:\n            - interface: ...\n              $patch: delete\n---\n") {
		t.Fatalf("nested list: %+v\n%s", a, a.Replace)
	}
	// The form, filled in, replaces the item.
	filled := strings.NewReplacer("interface: ...", "interface: end0", "... (the whole item, addresses as it should be)", "addresses: [10.0.0.3/24]").Replace(a.Replace[strings.Index(a.Replace, "machine:"):])
	res, err = PatchConfig(v1, [][]byte{[]byte(filled)}, nil)
	if err != nil || len(res.Appends) != 0 || bytes.Contains(res.Config, []byte("10.0.0.2/24")) || !bytes.Contains(res.Config, []byte("10.0.0.3/24")) {
		t.Fatalf("the filled form: %v, appends %+v\n%s", err, res.Appends, filled)
	}
}

// --replace-document replaces a document that has a kind (and a name, for
// named kinds); the v1alpha1 document has none: its "replacement" was a
// delete that matched nothing and a merge, so it is refused, saying to
// patch it instead.
func TestPatchReplaceOfTheV1alpha1DocumentRefused(t *testing.T) {
	cur := userControlPlane(t)
	for _, kind := range []string{"v1alpha1", ""} {
		_, err := PatchConfig(cur, nil, []Replacement{{Kind: kind, Document: []byte("version: v1alpha1\nmachine:\n    type: worker\ncluster:\n    clusterName: x\n")}})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "the v1alpha1 document cannot be replaced whole") {
			t.Fatalf("kind %q: %v", kind, err)
		}
	}
}

// A patch with an unknown key is refused naming the key's path, never a
// value, short or long (a short one such as "{a: 1}" or "hunter2" passed
// the scrub of long values before).
func TestPatchUnknownKeyQuotesNoValue(t *testing.T) {
	cur, err := os.ReadFile("testdata/talos114/valid/worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ patch, path string }{
		{"machine:\n  foo: {a: 1}\n", `"machine.foo.a"`},
		{"machine:\n  foo: hunter2\n", `"machine.foo"`},
		{"machine:\n  network:\n    hostnamez: x1\n", `"machine.network.hostnamez"`},
		{"machine:\n  secretz: N3wS3cr3tV4lu3Xq8Zp2\n", `"machine.secretz"`},
	} {
		_, err := PatchConfig(cur, [][]byte{[]byte(c.patch)}, nil)
		if !errors.Is(err, ErrPatch) {
			t.Fatalf("%q: %v", c.patch, err)
		}
		msg := err.Error()
		for _, v := range []string{"{a: 1}", ": 1", "hunter2", "x1", "N3wS3cr3t"} {
			if strings.Contains(msg, v) {
				t.Errorf("%q: the error quotes %q: %s", c.patch, v, msg)
			}
		}
		if !strings.Contains(msg, "unknown field(s) "+c.path) {
			t.Errorf("%q: the error does not name %s: %s", c.patch, c.path, msg)
		}
	}
}
