package plan

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The apply-all loop both front ends run: every node has its turn, in the
// inventory's order, whatever the others did; cp-1 takes its config; at
// worker-1's address worker-2's card answers (refused alone, nothing
// sent); worker-2 is configured (skipped). The error is the first
// failure; cp-1's bootstrap is the next step (no talosconfig).
func TestApplyAllEachNodeInTurn(t *testing.T) {
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	inv, err := inventory.Load(kit.Write(t, dir), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)
	at := func(i int, role, host string, configured bool) *nodetest.Server {
		o := imageOf(t, role)
		o.Addr, o.Hostname, o.Configured = ips[i]+":"+strconv.Itoa(port), host, configured
		return nodetest.Start(t, o)
	}
	cp := at(0, "controlplane", "cp-1", false)
	swapped := at(1, "worker", "worker-2", false)
	at(2, "worker", "worker-2", true)

	var kinds []string
	var notes []ConfigNotes
	out, err := ApplyAll(context.Background(), ApplyAllJob{
		Cluster: NewCluster(inv, nil, port),
		Node: NodeApplyJob{Port: port, Wait: 10 * time.Second, Every: 10 * time.Millisecond, Apply: ApplyJob{
			Check: NodeCheck{Profiles: factory.BuiltinProfiles(), Factory: factory.NewClient("http://127.0.0.1:1", nil)}}},
		Event: func(ev AllEvent) {
			if ev.Kind != AllApply && ev.Node != nil {
				kinds = append(kinds, string(ev.Kind)+" "+ev.Node.Hostname)
			} else if ev.Kind != AllApply {
				kinds = append(kinds, string(ev.Kind)+" ")
			}
			if ev.Kind == AllApply && ev.Apply.Kind == EventNote && ev.Apply.Config {
				t.Errorf("%s: a config note in the node's own events: %s", ev.Node.Hostname, ev.Apply.Text)
			}
			notes = append(notes, ev.Notes...)
		},
	})
	var id *IdentityError
	if !errors.As(err, &id) || id.Want.Hostname != "worker-1" {
		t.Fatalf("err %v, want worker-1's identity refusal", err)
	}
	want := []string{"node cp-1", "result cp-1", "node worker-1", "result worker-1", "node worker-2", "result worker-2", "notes ", "next cp-1"}
	if len(kinds) != len(want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %q, want %q", kinds, want)
		}
	}
	// The configs' notes once, after every node's turn, each naming the
	// nodes found waiting for it (worker-2 has a config: not it).
	if len(notes) != 2 || notes[0].Config != inv.Nodes[0].Config || !slices.Equal(notes[0].Hostnames, []string{"cp-1"}) ||
		notes[1].Config != inv.Nodes[1].Config || !slices.Equal(notes[1].Hostnames, []string{"worker-1"}) || len(notes[1].Notes) != 1 ||
		notes[1].Notes[0].Text != "12 documents are newer than Talos machinery v1.13: not checked here; the node checks them in its dry run" {
		t.Fatalf("notes %+v", notes)
	}
	if len(out.Nodes) != 3 || !out.Nodes[2].Configured || len(out.Applied) != 1 || out.Applied[0].Hostname != "cp-1" || out.Bootstrapped {
		t.Fatalf("outcome %+v", out)
	}
	if len(cp.Requests()) == 0 || len(swapped.Requests()) != 0 {
		t.Fatalf("cp-1 got %d requests, the swapped card %d", len(cp.Requests()), len(swapped.Requests()))
	}
}
