package node_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/node"
)

const (
	cpID     = "29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d" // overlay rpi_generic + siderolabs/newt
	workerID = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9" // overlay rpi_generic only
)

func TestLoadConfigGood(t *testing.T) {
	for _, tc := range []struct {
		file, typ, image, host string
		esc, kinds             []string
	}{
		{"worker.yaml", "worker", "factory.talos.dev/metal-installer/" + workerID + ":v1.14.5", "worker-1", nil, []string{"v1alpha1"}},
		{"worker-generic-installer.yaml", "worker", "ghcr.io/siderolabs/installer:v1.14.5", "worker-2", nil, []string{"v1alpha1"}},
		{"controlplane.yaml", "controlplane", "factory.talos.dev/metal-installer/" + cpID + ":v1.14.5", "cp-1", []string{"newt"}, []string{"v1alpha1", "ExtensionServiceConfig"}},
		{"worker-newt-esc.yaml", "worker", "factory.talos.dev/metal-installer/" + cpID + ":v1.14.5", "worker-1", []string{"newt"}, []string{"v1alpha1", "ExtensionServiceConfig", "UserVolumeConfig"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data := readTestdata(t, tc.file)
			cfg, err := node.LoadConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MachineType != tc.typ || cfg.InstallImage != tc.image || cfg.InstallDisk != "/dev/mmcblk0" || cfg.Hostname != tc.host {
				t.Errorf("got %+v", cfg)
			}
			if !slices.Equal(cfg.ExtensionServices, tc.esc) || !slices.Equal(cfg.Kinds, tc.kinds) || cfg.Size() != len(data) {
				t.Errorf("esc %v kinds %v size %d", cfg.ExtensionServices, cfg.Kinds, cfg.Size())
			}
		})
	}
}

func TestLoadConfigBad(t *testing.T) {
	worker := readTestdata(t, "worker.yaml")
	for _, tc := range []struct {
		name string
		data []byte
		line int
		want string
	}{
		{"not yaml", readTestdata(t, "not-yaml.txt"), 2, "not valid YAML"},
		{"broken yaml", readTestdata(t, "bad-yaml.yaml"), 3, "not valid YAML"},
		{"plain text", []byte("just some words\n"), 1, "not a YAML mapping"},
		{"empty", []byte("  \n\n"), 0, "empty"},
		{"binary", []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0, "binary"},
		{"huge", append(bytes.Repeat([]byte("# padding\n"), node.MaxConfigSize/10), worker...), 0, "at most"},
		{"missing kind", []byte("apiVersion: v1alpha1\nname: newt\n"), 1, "needs both apiVersion and kind"},
		{"no kind", []byte("name: newt\nenvironment: []\n"), 1, "has no kind"},
		{"only a list", []byte("- a\n- b\n"), 1, "not a YAML mapping"},
		{"invalid machine type", bytes.Replace(worker, []byte("type: worker"), []byte("type: toaster"), 1), 0, "validation failed"},
		{"duplicate ESC", append(readTestdata(t, "controlplane.yaml"), []byte("---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n")...), 56, "appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := node.LoadConfig(tc.data)
			var ce *node.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, node.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ConfigError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to mention %q", err, tc.want)
			}
			if tc.line != 0 && ce.Line != tc.line {
				t.Errorf("line = %d, want %d (%v)", ce.Line, tc.line, err)
			}
			t.Log(err)
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
		})
	}
}

// Configs that fail right where the fake key material sits: no error may
// quote it, however the loader words its message.
func TestLoadConfigErrorsNeverLeakSecrets(t *testing.T) {
	key, token := fakeKeyMaterial(t)
	keyB64 := b64(key)
	worker := string(readTestdata(t, "worker.yaml"))
	cases := map[string]string{
		"pem in broken flow": "machine:\n  ca:\n    crt: [" + strings.ReplaceAll(key, "\n", " ") + "\n",
		"token as type":      strings.Replace(worker, "type: worker", "type: "+token, 1),
		"token as kind":      "apiVersion: v1alpha1\nkind: " + token + "\n",
		"token as api":       "apiVersion: " + token + "\nkind: ExtensionServiceConfig\nname: x\n",
		"token as esc name":  worker + "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: " + token + "\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: " + token + "\n",
		"token as key":       worker + "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n" + token + ": 1\n",
		"seq as ca crt":      strings.Replace(worker, "crt: ", "crt: ["+keyB64+"] #", 1),
		"map as token":       strings.Replace(worker, "token: fakeaa.fakeplaceholder00", "token: {"+token+": "+keyB64+"}", 1),
		"bad install image":  strings.Replace(worker, "image: factory", "image: [\""+token+"\", factory", 1),
		"tab indentation":    "machine:\n\ttoken: " + token + "\n",
		"bad esc env":        worker + "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment: " + token + "\n",
		"quoted secret":      "machine: \"" + token + "\n",
		"pem raw":            "machine:\n  ca:\n    crt: " + key + "\n",
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := node.LoadConfig([]byte(data))
			if err == nil {
				t.Skip("loaded (nothing to leak)")
			}
			assertNoSecret(t, err.Error(), key, token, keyB64)
			t.Log(err)
		})
	}
}

func TestSanitizeKeepsUsefulWords(t *testing.T) {
	_, err := node.LoadConfig(readTestdata(t, "bad-yaml.yaml"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

func b64(s string) string { return base64Std(s) }

// A typo is a warning naming the key path (it may also be a field newer
// than the machinery), never an error and never the value.
func TestLoadConfigNamesUnknownKeyPath(t *testing.T) {
	worker := string(readTestdata(t, "worker.yaml"))
	bad := strings.Replace(worker, "  certSANs: []", "  certSANz: [s3cr3t-value-0123456789]", 1)
	cfg, err := node.LoadConfig([]byte(bad))
	if err != nil {
		t.Fatalf("err = %v, want a warning", err)
	}
	w := strings.Join(cfg.Warnings, "\n")
	if !strings.Contains(w, `unknown field(s) "machine.certSANz"`) || !strings.Contains(w, "document 1 (\"v1alpha1\")") {
		t.Fatalf("warnings = %q, want the dotted path of the misspelled key", w)
	}
	if strings.Contains(w, "s3cr3t") || strings.Contains(strings.Join(cfg.Unchecked, " "), "s3cr3t") {
		t.Fatalf("warning echoes the value: %v", w)
	}
	if cfg.MachineType != "worker" || cfg.InstallImage == "" {
		t.Errorf("incident fields not read: %+v", cfg)
	}
}

// A config as talosctl gen config v1.14 makes it with the user's patches:
// the kinds machinery v1.13 does not know are passed through and named,
// and what the checks need is still read from them.
func TestLoadConfigNewerKinds(t *testing.T) {
	cfg, err := node.LoadConfig(readTestdata(t, "worker-v114.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v1alpha1", "UnattendedInstallConfig", "UserVolumeConfig", "SysctlConfig", "KernelModuleConfig"}
	if !slices.Equal(cfg.Kinds, want) {
		t.Errorf("kinds %v, want %v", cfg.Kinds, want)
	}
	if len(cfg.Unchecked) != 1 || !strings.Contains(cfg.Unchecked[0], `documents 2, 4, 5 ("UnattendedInstallConfig", "SysctlConfig", "KernelModuleConfig"): not checked locally (newer than Talos machinery v1.13)`) {
		t.Errorf("unchecked = %q", cfg.Unchecked)
	}
	if cfg.InstallImageFrom != "UnattendedInstallConfig installer.image" || !strings.Contains(cfg.InstallImage, workerID) {
		t.Errorf("installer %q from %q", cfg.InstallImage, cfg.InstallImageFrom)
	}
	// An unknown kind at the end (the old wrong-kind fixture) passes too.
	cfg, err = node.LoadConfig(readTestdata(t, "wrong-kind.yaml"))
	if err != nil || len(cfg.Unchecked) != 1 || !strings.Contains(cfg.Unchecked[0], `"KubeNodeConfig"`) {
		t.Fatalf("wrong-kind.yaml: %v %+v", err, cfg)
	}
	// Local validation errors still block when every document was checked.
	_, err = node.LoadConfig(bytes.Replace(readTestdata(t, "worker.yaml"), []byte("type: worker"), []byte("type: toaster"), 1))
	if !errors.Is(err, node.ErrInvalidConfig) {
		t.Errorf("invalid machine type: %v", err)
	}
}
