package node

import (
	"regexp"
	"strings"
	"testing"
)

// talosctlCommand finds the talosctl command lines in a text.
var talosctlCommand = regexp.MustCompile("talosctl [^()`;,]*")

// assertEndpoints fails when a talosctl command suggested in text, other
// than those that need no talosconfig (gen config, --insecure), lacks
// --endpoints: a talosconfig from `talosctl gen config` has `endpoints:
// []`, and talosctl then fails with "failed to determine endpoints".
func assertEndpoints(t *testing.T, what, text string) {
	t.Helper()
	for _, cmd := range talosctlCommand.FindAllString(text, -1) {
		if strings.HasPrefix(cmd, "talosctl gen ") || strings.Contains(cmd, "--insecure") {
			continue
		}
		if !strings.Contains(cmd, "--endpoints ") || !strings.Contains(cmd, "--nodes ") {
			t.Errorf("%s suggests %q: without --nodes and --endpoints", what, cmd)
		}
	}
}

func TestTalosctlNamesNodeAndEndpoint(t *testing.T) {
	for _, c := range []struct {
		talosconfig, endpoint string
		args                  []string
		want                  string
	}{
		{"talos/talosconfig", "127.0.0.20:50000", []string{"kubeconfig"}, "talosctl --talosconfig talos/talosconfig --nodes 127.0.0.20 --endpoints 127.0.0.20 kubeconfig"},
		{"", "192.168.1.20", []string{"logs", "ext-newt"}, "talosctl --nodes 192.168.1.20 --endpoints 192.168.1.20 logs ext-newt"},
		{"my talos/tc", "127.0.0.20:50001", []string{"version"}, "talosctl --talosconfig 'my talos/tc' --nodes 127.0.0.20 --endpoints 127.0.0.20:50001 version"},
		{"", "[::1]:50000", []string{"health"}, "talosctl --nodes ::1 --endpoints ::1 health"},
		{"", "", []string{"reboot"}, "talosctl --nodes <node-ip> --endpoints <node-ip> reboot"},
	} {
		if got := Talosctl(c.talosconfig, c.endpoint, c.args...); got != c.want {
			t.Errorf("Talosctl(%q, %q, %q) = %q, want %q", c.talosconfig, c.endpoint, c.args, got, c.want)
		}
	}
}

// Every talosctl command the node package suggests names the node's
// endpoint (it was "talosctl upgrade --nodes IP", "talosctl version").
func TestSuggestedTalosctlCommandsHaveEndpoints(t *testing.T) {
	assertEndpoints(t, "UpgradeCommand", UpgradeCommand("192.168.1.10", "factory.talos.dev/metal-installer/abc:v1.14.5"))
	assertEndpoints(t, "UpgradeCommand without a node", UpgradeCommand("", ""))
	for _, phase := range []string{PhaseNothingSent, PhasePullSent, PhasePulled, PhaseInstallerSent, PhaseInstallFailed, PhaseInstalled, PhaseRebootRequested, PhaseRebooted, PhaseHealthy} {
		for _, api := range []string{"LifecycleService", "MachineService.Upgrade"} {
			r := &UpgradeResult{Endpoint: "192.168.1.10:50000", From: "v1.14.5", To: "v1.14.6", Image: "x", API: api, Phase: phase}
			assertEndpoints(t, "upgrade "+phase, r.State())
		}
	}
	for _, r := range []*BootstrapResult{{Endpoint: "192.168.1.10:50000", Accepted: true}, {Endpoint: "192.168.1.10:50000", Attempts: 2, unanswered: true}} {
		assertEndpoints(t, "bootstrap", r.State())
	}
}
