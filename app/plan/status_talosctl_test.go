package plan

import (
	"testing"
	"time"

	"github.com/talosflash/talosflash/node"
)

// A failed service's fix is a talosctl command that works with the
// talosconfig gen config writes (endpoints: []): it names the node's
// endpoint and the talosconfig in use (it was "talosctl -n IP logs ID").
func TestFailedServiceFixNamesEndpoint(t *testing.T) {
	st := &node.Status{Endpoint: "127.0.0.21:50000", Stage: "running", Services: []node.ServiceStatus{{ID: "ext-newt", State: "Failed", Health: "unknown", LastEvent: "exited"}}}
	c := StatusCheck{Talosconfig: "talos/talosconfig"}
	ns := c.Diagnose(time.Now(), testMember(t, "cp-1", node.RoleControlPlane, "", st.Endpoint), st, nil, nil)
	want := "read its log: talosctl --talosconfig talos/talosconfig --nodes 127.0.0.21 --endpoints 127.0.0.21 logs ext-newt"
	for _, d := range ns.Diagnoses {
		if d.Code == "service-failed" {
			if d.Fix != want {
				t.Fatalf("fix %q, want %q", d.Fix, want)
			}
			return
		}
	}
	t.Fatalf("no service-failed diagnosis: %+v", ns.Diagnoses)
}
