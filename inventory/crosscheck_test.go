package inventory

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

const (
	cpID     = "29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d"
	workerID = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
)

// crossInventory is a good inventory for node/testdata's configs (cluster
// homelab, endpoint https://192.168.1.10:6443, each role's installer).
const crossInventory = `cluster: homelab
gateway: 192.168.1.1
nodes:
  - hostname: cp-1
    role: controlplane
    address: 192.168.1.10/24
    config: talos/controlplane.yaml
    installer: talos/installer-controlplane.yaml
  - hostname: worker-1
    role: worker
    address: 192.168.1.11/24
    config: talos/worker.yaml
    installer: talos/installer-worker.yaml
`

func installerFile(t *testing.T, role string) string {
	t.Helper()

	pr, err := factory.FindProfile(factory.BuiltinProfiles(), role)
	if err != nil {
		t.Fatal(err)
	}

	b, err := factory.InstallerPatch(pr, "")
	if err != nil {
		t.Fatal(err)
	}

	return string(b)
}

// Each node's files are cross-checked with the node and each other: each
// mismatch is a problem at the inventory's line naming the file:line at
// fault and the fix; what cannot be checked offline is a note.
func TestCrossCheck(t *testing.T) {
	worker, cp, v114 := string(testkit.Testdata(t, "worker.yaml")), string(testkit.Testdata(t, "controlplane.yaml")), string(testkit.Testdata(t, "worker-v114.yaml"))
	uicLine := "  image: factory.talos.dev/metal-installer/" + workerID + ":v1.14.5\nprovisioning:"
	if !strings.Contains(v114, uicLine) {
		t.Fatal("worker-v114.yaml has no UnattendedInstallConfig installer.image")
	}

	cases := []struct {
		name   string
		edit   func(files map[string]string)
		want   []string // in one problem, in order
		note   string   // in a note, when there is one
		absent bool     // no problem at all
	}{
		{name: "good", absent: true},
		{
			name: "worker with the control plane's installer file",
			edit: func(f map[string]string) {
				f["talosflash.yaml"] = strings.Replace(f["talosflash.yaml"], "installer: talos/installer-worker.yaml", "installer: talos/installer-controlplane.yaml", 1)
			},
			want: []string{"talosflash.yaml:13: node worker-1 (worker): installer ", "installer-controlplane.yaml:", " names schematic 29a2fae6a7f0… (the controlplane image), not the worker image's ee21ef4a5ef8…",
				"fix: point installer: at the worker installer file", "talosflash schematic --role worker"},
		},
		{
			name: "worker config of type controlplane",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(cp, "hostname: cp-1", "hostname: worker-1", 1)
			},
			want: []string{"talosflash.yaml:12: node worker-1: config ", "worker.yaml is a controlplane config (machine.type at ", "worker.yaml:7), the node's role is worker", "fix: point config: at the worker config"},
		},
		{
			name: "UnattendedInstallConfig installer of the other role",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(v114, uicLine, strings.Replace(uicLine, workerID, cpID, 1), 1)
			},
			want: []string{"talosflash.yaml:12: node worker-1 (worker): config ", "worker.yaml:52: UnattendedInstallConfig installer.image names schematic 29a2fae6a7f0… (the controlplane image), not the worker image's",
				"fix: set UnattendedInstallConfig installer.image to factory.talos.dev/metal-installer/" + workerID + ":v1.14.5"},
		},
		{
			name: "UnattendedInstallConfig installer of another version",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(v114, uicLine, strings.Replace(uicLine, ":v1.14.5", ":v1.14.4", 1), 1)
			},
			want: []string{"worker.yaml:52: UnattendedInstallConfig installer.image is for Talos v1.14.4, the inventory's version is v1.14.5", "fix: set "},
		},
		{
			name: "machine.install.image of the other role",
			edit: func(f map[string]string) { f["talos/controlplane.yaml"] = strings.Replace(cp, cpID, workerID, 1) },
			want: []string{"talosflash.yaml:7: node cp-1 (controlplane): config ", "controlplane.yaml:20: machine.install.image names schematic ee21ef4a5ef8… (the worker image)"},
		},
		{
			name: "inventory version is not the config's",
			edit: func(f map[string]string) { f["talosflash.yaml"] = "talosVersion: v1.14.6\n" + f["talosflash.yaml"] },
			want: []string{"controlplane.yaml:20: machine.install.image is for Talos v1.14.5, the inventory's version is v1.14.6"},
		},
		{
			name: "endpoint names a worker",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(worker, "https://192.168.1.10:6443", "https://192.168.1.11:6443", 1)
			},
			want: []string{"talosflash.yaml:12: config ", "worker.yaml:29: the control-plane endpoint https://192.168.1.11:6443 is worker-1's address, a worker", "fix: use a control plane's address: https://192.168.1.10:6443"},
		},
		{
			name: "endpoint names a worker by hostname",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(worker, "https://192.168.1.10:6443", "https://worker-1:6443", 1)
			},
			want: []string{"worker.yaml:29: the control-plane endpoint https://worker-1:6443 names worker-1, a worker"},
		},
		{
			name: "endpoint outside the inventory",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(worker, "https://192.168.1.10:6443", "https://10.9.9.9:6443", 1)
			},
			want: []string{"worker.yaml:29: the control-plane endpoint https://10.9.9.9:6443 is no node of the inventory, nor in a control plane's subnet", "fix: use a control plane's address"},
		},
		{
			name: "endpoint is a DNS name",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(worker, "https://192.168.1.10:6443", "https://k8s.home.arpa:6443", 1)
			},
			absent: true,
			note:   "worker.yaml:29: the control-plane endpoint https://k8s.home.arpa:6443 is a DNS name: not checked",
		},
		{
			name: "endpoint is a VIP",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(worker, "https://192.168.1.10:6443", "https://192.168.1.50:6443", 1)
			},
			absent: true,
			note:   "the control-plane endpoint https://192.168.1.50:6443 is no node's address (a VIP?): not checked",
		},
		{
			name: "two cluster names",
			edit: func(f map[string]string) {
				f["talos/worker.yaml"] = strings.Replace(worker, "clusterName: homelab", "clusterName: garage", 1)
				f["talosflash.yaml"] = strings.Replace(f["talosflash.yaml"], "cluster: homelab\n", "", 1)
			},
			want: []string{"talosflash.yaml:11: node worker-1: config ", "worker.yaml:30 names cluster \"garage\", but ", "controlplane.yaml:30 names \"homelab\": one cluster has one name", "fix: generate every node's config from one talosctl gen config run"},
		},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{
				"talosflash.yaml":                   crossInventory,
				"talos/controlplane.yaml":           cp,
				"talos/worker.yaml":                 worker,
				"talos/installer-controlplane.yaml": installerFile(t, "controlplane"),
				"talos/installer-worker.yaml":       installerFile(t, "worker"),
			}
			if c.edit != nil {
				c.edit(files)
			}

			dir := testkit.WriteFiles(t, files)
			inv, err := Load(filepath.Join(dir, "talosflash.yaml"), Options{})

			var notes []string
			if inv != nil {
				for _, n := range inv.Notes {
					notes = append(notes, n.Error())
				}
			}

			if c.absent {
				if err != nil {
					t.Fatalf("problems:\n%v", err)
				}
			} else if !inOneLine(err, c.want) {
				t.Fatalf("no problem says %q:\n%v", c.want, err)
			}

			if c.note == "" && len(notes) > 0 || c.note != "" && !strings.Contains(strings.Join(notes, "\n"), c.note) {
				t.Fatalf("notes %q, want %q", notes, c.note)
			}

			// Only the fields checked are quoted: no secret of the configs.
			out := strings.Join(notes, "\n")
			if err != nil {
				out += err.Error()
			}

			for _, name := range []string{"talos/controlplane.yaml", "talos/worker.yaml"} {
				frags, ferr := nodetest.ConfigSecretFragments([]byte(files[name]))
				if ferr != nil {
					t.Fatal(ferr)
				}

				for _, f := range frags {
					if strings.Contains(out, f) {
						t.Fatalf("a secret of %s is in the output: %q", name, f)
					}
				}
			}
		})
	}
}

// inOneLine reports whether one line of err holds every part, in order.
func inOneLine(err error, parts []string) bool {
	if err == nil {
		return false
	}

	for _, line := range strings.Split(err.Error(), "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}

			rest = rest[i+len(p):]
		}

		if ok {
			return true
		}
	}

	return false
}
