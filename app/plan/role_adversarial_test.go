package plan

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// A worker config whose machine.type is left out or "join" (a worker to
// Talos: machine.go ParseType) sent to the inventory's control plane:
// refused as a role mismatch that no force sends. Before, "join" passed
// with no finding at all and a left-out type only with a forcible
// "no machine config" finding: either way cp-1 became a worker.
func TestCheckApplyRoleOfTypeLeftOutOrJoin(t *testing.T) {
	base := testkit.Testdata(t, "worker-newt-esc.yaml") // Newt's document: the incident check passes
	for _, c := range []struct{ name, repl, says string }{
		{"left out", "", "no machine.type"},
		{"join", "  type: join\n", "machine.type: join"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := bytes.Replace(base, []byte("  type: worker\n"), []byte(c.repl), 1)
			opts := imageOf(t, "controlplane")
			opts.Hostname = "cp-1"
			srv := nodetest.Start(t, opts)
			var rec recorder
			job := applyJob(srv, "worker.yaml", data, &rec)
			job.Expect = testMember(t, "cp-1", node.RoleControlPlane, "controlplane", srv.Addr())
			job.Expect.Config = "talos/controlplane.yaml"
			rv, err := CheckApply(context.Background(), job)
			var rm *RoleMismatchError
			if !errors.As(err, &rm) || !errors.Is(err, node.ErrInvalidConfig) {
				t.Fatalf("check: %v", err)
			}
			for _, s := range []string{"cp-1 is a control plane", "it would make cp-1 a worker", c.says, "talos/controlplane.yaml"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not say %q", err, s)
				}
			}
			if rv != nil {
				if _, err := rv.Send(context.Background(), true); err == nil {
					t.Error("a forced send went through")
				}
			}
			if n := len(srv.Requests()); n != 0 {
				t.Fatalf("the node got %d requests", n)
			}
		})
	}
}
