package node

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// A configured node's config is read as talosctl reads it (the COSI
// MachineConfig, os:admin only), and a config sent with the talosconfig
// reaches it over mTLS: its dry run answers with the diff and changes
// nothing; the apply replaces the config and restarts the extension
// services whose document changed (a Newt without its document waits).
func TestReadRunningAndSecureApply(t *testing.T) {
	pki := newPKI(t)
	cfg := userControlPlane(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[0].Schematic(), Bootstrapped: true, Config: cfg})
	tc, tcData := loadTC(t, pki, "os:admin")
	var log progressLog
	run, err := ReadRunning(context.Background(), n.Addr(), tc, fastWait(&log))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(run.Config, cfg) || run.Version != nodetest.DefaultVersion || run.Booted == nil || !run.Booted.HasExtension("siderolabs/newt") || n.MachineConfigReads() != 1 {
		t.Fatalf("read: version %s booted %v, %d bytes (want %d), %d reads", run.Version, run.Booted, len(run.Config), len(cfg), n.MachineConfigReads())
	}
	reader, _ := loadTC(t, pki, "os:reader")
	if _, err := ReadRunning(context.Background(), n.Addr(), reader, fastWait(&log)); err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("a reader read the config: %v", err)
	}

	without := cfg[:bytes.Index(cfg, []byte("\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig"))+1]
	res, err := Apply(context.Background(), ApplyOptions{Endpoint: n.Addr(), Config: without, DryRun: true, Talosconfig: tc})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.ModeDetails, "Dry run summary:") || !bytes.Equal(n.Config(), cfg) || !strings.Contains(services(t, n, tc), "ext-newt Running") {
		t.Fatalf("dry run: %s; config changed %v", res.ModeDetails, !bytes.Equal(n.Config(), cfg))
	}
	if _, err := Apply(context.Background(), ApplyOptions{Endpoint: n.Addr(), Config: without, Mode: ModeReboot, Talosconfig: tc}); err == nil || !strings.Contains(err.Error(), "REBOOT mode is not supported") {
		t.Fatalf("mode reboot on a configured node: %v", err)
	}
	if _, err := Apply(context.Background(), ApplyOptions{Endpoint: n.Addr(), Config: without, Talosconfig: reader}); err == nil {
		t.Fatal("a reader applied a config")
	} else if re, ok := err.(*RefusedError); !ok || re.Code != codes.PermissionDenied {
		t.Fatalf("reader apply: %v", err)
	}
	res, err = Apply(context.Background(), ApplyOptions{Endpoint: n.Addr(), Config: without, Talosconfig: tc})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].Mode != ModeNoReboot || !bytes.Equal(n.Config(), without) || !strings.Contains(services(t, n, tc), "ext-newt Waiting") {
		t.Fatalf("apply: mode %q, config applied %v, services %s", res.Messages[0].Mode, bytes.Equal(n.Config(), without), services(t, n, tc))
	}
	applies := n.ConfigApplies()
	if len(applies) != 3 || !applies[0].DryRun || applies[2].DryRun { // the reader's never reached the handler
		t.Fatalf("applies %+v", len(applies))
	}
	assertNoSecret(t, tcData, log.text())
}

func services(t *testing.T, n *nodetest.Node, tc *Talosconfig) string {
	t.Helper()
	s, err := dialSecure(context.Background(), n.Addr(), tc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list, err := s.services(context.Background(), WaitOptions{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, si := range list {
		out = append(out, si.GetId()+" "+si.GetState())
	}
	return strings.Join(out, ", ")
}
