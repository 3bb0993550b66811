package plan

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// A profiles file whose "worker" adds Newt (a profile named like a
// built-in replaces it), and apply --node --file worker.yaml on the node
// that booted it: the incident finding's fix must not send the user back
// to "the worker profile", the very image that caused it (issue 37.2).
func TestIncidentAdviceNeverNamesTheCausingProfile(t *testing.T) {
	cp, err := factory.FindProfile(factory.BuiltinProfiles(), "controlplane")
	if err != nil {
		t.Fatal(err)
	}
	// Not the control plane's schematic (that one is recognised as the
	// control plane, a role mismatch): Newt and iSCSI.
	newtWorker := factory.Profile{Name: "worker", Overlay: cp.Overlay, Extensions: []string{"siderolabs/iscsi-tools", "siderolabs/newt"}}
	profiles := []factory.Profile{cp, newtWorker}

	srv := nodetest.Start(t, nodetest.Options{Schematic: newtWorker.Schematic(), Hostname: "worker-1"})
	var rec recorder
	job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.Check.Profiles = profiles
	rv, err := CheckApply(context.Background(), job)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	var found *node.Finding
	for i, f := range rv.Findings {
		if f.Code == node.CodeExtensionConfigMissing {
			found = &rv.Findings[i]
		}
	}
	if found == nil {
		t.Fatalf("no incident finding: %+v", rv.Findings)
	}
	if strings.Contains(found.Fix, "worker profile") || strings.Contains(found.Fix, "controlplane profile") {
		t.Errorf("the fix names a profile whose image has Newt: %q", found.Fix)
	}
	if !strings.Contains(found.Fix, "name: newt") {
		t.Errorf("the fix does not give the document: %q", found.Fix)
	}
	_, err = rv.Send(context.Background(), false)
	var be *BlockedError
	if !errors.As(err, &be) || len(srv.Requests()) != 0 {
		t.Fatalf("send: %v, %d requests", err, len(srv.Requests()))
	}
}
