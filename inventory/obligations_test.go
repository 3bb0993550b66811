package inventory

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
)

// The incident refused at the first door that can see it (issue 37): an
// inventory whose node boots an image with an extension that waits for its
// ExtensionServiceConfig, and whose config lacks it, is an inventory
// problem at the node's line, naming its config's line, the document to
// add and the profile to fix — never the image that caused it — whatever
// the profile is called.
func TestIncidentIsAnInventoryProblem(t *testing.T) {
	newtWorker := "profiles:\n  - name: worker\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/newt]\n"
	noESC := func(t *testing.T, dir, file string) {
		data := testkit.Testdata(t, "talos114/valid/controlplane.yaml")
		i := bytes.Index(data, []byte("kind: ExtensionServiceConfig"))
		start := bytes.LastIndex(data[:i], []byte("---\n"))
		rest := []byte{}
		if end := bytes.Index(data[i:], []byte("\n---\n")); end >= 0 {
			rest = data[i+end+1:]
		}
		cut := append(append([]byte{}, data[:start]...), rest...)
		if bytes.Contains(cut, []byte("kind: ExtensionServiceConfig")) {
			t.Fatal("the fixture still has the document")
		}
		testkit.WriteFile(t, dir, file, bytes.ReplaceAll(cut, []byte("https://192.168.1.20:6443"), []byte("https://127.0.0.21:6443")))
	}
	cases := []struct {
		name     string
		prep     func(t *testing.T, dir string) // after the three-node inventory is written
		header   string                         // lines before nodes:
		profiles string
		want     map[string]string // node -> a word of the fix; absent: no problem
		notFix   string
	}{
		{name: "a custom worker profile adds Newt", profiles: newtWorker, header: "profiles: profiles.yaml\n",
			want:   map[string]string{"worker-1": "remove siderolabs/newt from profile worker in ", "worker-2": "remove siderolabs/newt from profile worker in "},
			notFix: "profile worker (without"},
		{name: "the control plane's config lacks Newt's document",
			prep: func(t *testing.T, dir string) { noESC(t, dir, "talos/controlplane.yaml") },
			want: map[string]string{"cp-1": "give cp-1 a profile without siderolabs/newt"}, notFix: "profile worker"},
		{name: "the built-in worker and the built-in control plane with its document", want: map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := testkit.Inventory{Configs: true}.Write(t, dir)
			if c.profiles != "" {
				testkit.WriteFile(t, dir, "profiles.yaml", c.profiles)
			}
			if c.header != "" {
				testkit.WriteFile(t, dir, "talosflash.yaml", c.header+testkit.Inventory{Configs: true}.YAML())
			}
			if c.prep != nil {
				c.prep(t, dir)
			}
			_, err := Load(path, Options{})
			var ps Problems
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("problems: %v", err)
				}
				return
			}
			if !errors.As(err, &ps) {
				t.Fatalf("no problems: %v", err)
			}
			lines := strings.Split(testkit.Inventory{Configs: true}.YAML(), "\n")
			offset := strings.Count(c.header, "\n")
			for host, fix := range c.want {
				nodeLine := offset + 1 + indexOf(lines, "  - hostname: "+host)
				configLine := nodeLine + 3
				var found *Problem
				for i := range ps {
					if strings.Contains(ps[i].Message, "node "+host+":") && strings.Contains(ps[i].Message, "ExtensionServiceConfig named newt") {
						found = &ps[i]
					}
				}
				if found == nil {
					t.Fatalf("%s: no incident problem in\n%v", host, err)
				}
				if found.Line != nodeLine || !strings.Contains(found.Message, "talosflash.yaml:"+strconv.Itoa(configLine)) {
					t.Errorf("%s: at line %d, config line in %q; want node line %d, config line %d", host, found.Line, found.Message, nodeLine, configLine)
				}
				if !strings.Contains(found.Fix, "add an ExtensionServiceConfig document named newt to "+filepath.Join(dir, "talos")) || !strings.Contains(found.Fix, fix) {
					t.Errorf("%s: fix %q; want the document and %q", host, found.Fix, fix)
				}
				if c.notFix != "" && strings.Contains(found.Fix, c.notFix) {
					t.Errorf("%s: the fix names the image that caused it: %q", host, found.Fix)
				}
			}
			if n := strings.Count(err.Error(), "ExtensionServiceConfig named newt"); n != len(c.want) {
				t.Errorf("%d incident problems, want %d:\n%v", n, len(c.want), err)
			}
		})
	}
}

func indexOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}
