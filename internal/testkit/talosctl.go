package testkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TalosctlValidate is Talos v1.14's own verdict on a config: `talosctl
// validate --config FILE --mode metal` of a talosctl v1.14 found on PATH
// (cmd/talosctl/cmd/mgmt/validate.go: exit 0 when valid, else the loader's
// or validator's error). "valid", or "invalid: " and what it said. The
// test is skipped without such a talosctl (CI has none): the verdicts the
// tests record are then not re-checked.
func TalosctlValidate(t testing.TB, data []byte) string {
	t.Helper()
	bin := Talosctl114()
	if bin == "" {
		t.Skip("no talosctl v1.14 on PATH: the recorded Talos 1.14 verdicts are not re-checked")
	}
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "validate", "--config", f, "--mode", "metal").CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "valid"
	case errors.As(err, &ee):
		return "invalid: " + strings.TrimSpace(string(out))
	}
	t.Fatal(err)
	return ""
}

// SameVerdict: Talos' verdict (TalosctlValidate) agrees with a recorded
// one: both valid, or both invalid with the recorded reason in what
// talosctl said (its wording around the reason may differ).
func SameVerdict(got, recorded string) bool {
	reason, invalid := strings.CutPrefix(strings.TrimSpace(recorded), "invalid: ")
	if !invalid {
		return got == "valid" && strings.TrimSpace(recorded) == "valid"
	}
	return strings.HasPrefix(got, "invalid: ") && strings.Contains(got, strings.TrimSpace(reason))
}

// Talosctl114 is the path of a talosctl v1.14 on PATH ("" none).
func Talosctl114() string {
	bin, err := exec.LookPath("talosctl")
	if err != nil {
		return ""
	}
	v, _ := exec.Command(bin, "version", "--client", "--short").Output()
	if !strings.Contains(string(v), "v1.14.") {
		return ""
	}
	return bin
}
