package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/siderolabs/talos/pkg/machinery/config/configdiff"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/node/nodetest"
)

// A config value that holds the loader's "unknown keys found during
// decoding:" words must not switch the whole dry-run reply from structural
// redaction to the guessing sanitizer (which keeps plain-word secrets and
// drops the diff).
func TestDiffWithUnknownKeysWordsInAValue(t *testing.T) {
	const secret = "correct horse battery staple"
	in := "Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\n--- a\n+++ b\n@@ -0,0 +1,8 @@\n" +
		"+version: v1alpha1\n+machine:\n+    type: worker\n+    token: " + secret + "\n+    nodeLabels:\n+        note: unknown keys found during decoding: x\n"
	got := sanitizeLines(in)
	for _, f := range nodetest.Fragments(secret) {
		if strings.Contains(got, f) {
			t.Errorf("shows %q of the token:\n%s", f, got)
			break
		}
	}
	if !strings.Contains(got, "+    type: worker") || !strings.Contains(got, "+    token: <redacted>") {
		t.Errorf("the diff's structure is gone:\n%s", got)
	}
}

// The same through a dry run on the fake node: the reply keeps its diff and
// shows no piece of the value.
func TestDryRunWithUnknownKeysWordsInAValue(t *testing.T) {
	worker := readFixture(t, "worker.yaml")
	const secret = "correct horse battery staple"
	cfg := strings.Replace(worker, "cluster:\n", "cluster:\n  extraManifestHeaders:\n    X-Note: "+secret+"\n    X-Other: 'unknown keys found during decoding: x'\n", 1)
	srv := nodetest.Start(t, nodetest.Options{})
	res, err := Apply(context.Background(), ApplyOptions{Endpoint: srv.Addr(), Config: []byte(cfg), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range nodetest.Fragments(secret) {
		if strings.Contains(res.ModeDetails, f) {
			t.Errorf("shows %q:\n%s", f, res.ModeDetails)
			break
		}
	}
	if !strings.Contains(res.ModeDetails, "\n+    type: worker") {
		t.Errorf("the diff is gone:\n%s", res.ModeDetails)
	}
}

// The structural redaction alone (no echo scrub: values the node already
// holds are not in the config sent) on the old side of a diff: the node's
// current config with fresh secrets planted at the places it accepts.
func TestRedactOldSideWithoutEcho(t *testing.T) {
	for name, data := range realConfigs(t) {
		t.Run(name, func(t *testing.T) {
			base, err := configloader.NewFromBytes(data)
			if err != nil {
				t.Skipf("machinery %s does not load it: %v", MachineryVersion, err)
			}
			all := places(parseDocs(t, data))
			leaks, tested := 0, 0
			defer func() { t.Logf("%d of %d places reached the diff", tested, len(all)) }()
			for i := range all {
				docs := parseDocs(t, data)
				s := freshSecret(t)
				plant(places(docs)[i], s)
				old, err := configloader.NewFromBytes(encodeDocs(t, docs))
				if err != nil {
					continue
				}
				d, err := configdiff.DiffConfigs(old, base)
				if err != nil || d == "" {
					continue
				}
				tested++
				got := sanitizeLines("Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\n" + d)
				for _, f := range nodetest.Fragments(s) {
					if strings.Contains(got, f) {
						leaks++
						t.Errorf("%s (%s): shows %q:\n%s", all[i].path, map[bool]string{true: "multi-line", false: "line"}[all[i].newline], f, got)
						break
					}
				}
				if leaks > 3 {
					t.FailNow()
				}
			}
		})
	}
}

// Null documents (the node skips them) before the config do not hide its
// values from the scrub of the node's replies.
func TestRefusalEchoScrubbedAfterNullDocuments(t *testing.T) {
	worker := readFixture(t, "worker.yaml")
	const secret = "hunter2hunter2"
	cfg := strings.Repeat("---\nnull\n", 1000) + "---\n" +
		strings.Replace(worker, "cluster:\n", "cluster:\n  extraManifestHeaders:\n    X-Note: "+secret+"\n", 1)
	srv := nodetest.Start(t, nodetest.Options{ApplyErr: status.Error(codes.InvalidArgument,
		`configuration validation failed: header X-Note value "`+secret+`" is not allowed`)})
	_, err := Apply(context.Background(), ApplyOptions{Endpoint: srv.Addr(), Config: []byte(cfg)})
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error shows the value: %v", err)
	}
}

// The incident checks' findings (message and fix, shown before anything is
// sent) hold no piece of a secret planted anywhere non-public.
func TestFindingsShowNoPlantedSecret(t *testing.T) {
	for name, data := range realConfigs(t) {
		t.Run(name, func(t *testing.T) {
			all := places(parseDocs(t, data))
			checked := 0
			for i := range all {
				docs := parseDocs(t, data)
				s := freshSecret(t)
				plant(places(docs)[i], s)
				cfg, err := LoadConfig(encodeDocs(t, docs))
				if err != nil {
					continue
				}
				checked++
				for _, role := range []Role{RoleUnknown, RoleWorker, RoleControlPlane} {
					for _, f := range InspectWith(cfg, InspectOptions{Role: role}) {
						for _, frag := range nodetest.Fragments(s) {
							if strings.Contains(f.Message, frag) || strings.Contains(f.Fix, frag) {
								t.Fatalf("%s: finding shows %q: %+v", all[i].path, frag, f)
							}
						}
					}
				}
			}
			t.Logf("%d of %d places loaded", checked, len(all))
		})
	}
}

// The structural redaction alone on configs machinery v1.13 cannot load
// (Talos 1.14 kinds): the diff a node would show for them, as the encoder
// writes it (4-space indent), with a fresh secret at each non-public place.
func TestRedactUnknownKindsWithoutEcho(t *testing.T) {
	for name, data := range realConfigs(t) {
		t.Run(name, func(t *testing.T) {
			all := places(parseDocs(t, data))
			for i := range all {
				docs := parseDocs(t, data)
				s := freshSecret(t)
				plant(places(docs)[i], s)
				var b strings.Builder
				enc := yaml.NewEncoder(&b)
				enc.SetIndent(4)
				for _, d := range docs {
					if err := enc.Encode(d); err != nil {
						t.Fatal(err)
					}
				}
				enc.Close()
				lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
				diff := fmt.Sprintf("--- a\n+++ b\n@@ -0,0 +1,%d @@\n+", len(lines)) + strings.Join(lines, "\n+") + "\n"
				got := sanitizeLines("Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\n" + diff)
				for _, f := range nodetest.Fragments(s) {
					if strings.Contains(got, f) {
						t.Fatalf("%s (multi-line %v): shows %q:\n%s", all[i].path, all[i].newline, f, got)
					}
				}
			}
		})
	}
}
