package plan

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// ApplyJob.Expect: the node at the address must be the inventory's node
// (hostname and booted profile). Another one (a swapped card) is refused
// by CheckApply itself, naming both, and Send refuses it even forced: the
// CLI's apply --inventory and the GUI's inventory rows share this gate.
func TestCheckApplyExpectRefusesAnotherNode(t *testing.T) {
	opts := imageOf(t, "worker")
	opts.Hostname = "worker-2"
	srv := nodetest.Start(t, opts)
	data := testkit.Testdata(t, "controlplane.yaml")
	want := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", srv.Addr())

	var rec recorder
	job := applyJob(srv, "controlplane.yaml", data, &rec)
	job.Expect = want
	rv, err := CheckApply(context.Background(), job)
	var id *IdentityError
	if !errors.As(err, &id) || !errors.Is(err, node.ErrInvalidConfig) || rv == nil {
		t.Fatalf("check: %v", err)
	}
	for _, s := range []string{"cp-1", "worker-2", "booted the worker image"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not name %q", err, s)
		}
	}
	if _, err := rv.Send(context.Background(), true); err == nil || len(srv.Requests()) != 0 {
		t.Fatalf("forced send after an identity refusal: %v, %d requests", err, len(srv.Requests()))
	}

	// The right node passes the same gate.
	opts.Hostname = "worker-1"
	ok := nodetest.Start(t, opts)
	w := testMember(t, "worker-1", node.RoleWorker, "worker", ok.Addr())
	job = applyJob(ok, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.Expect = w
	if rv, err := CheckApply(context.Background(), job); err != nil {
		t.Fatal(err)
	} else if _, err := rv.Send(context.Background(), false); err != nil || len(ok.Requests()) == 0 {
		t.Fatalf("send: %v", err)
	}
}

// A node that is the inventory's (its hostname) but booted another role's
// image is its own card flashed wrong: the refusal says to flash that card
// again with its role's image, not "cards swapped" (issue 29).
func TestCheckApplyExpectWrongImageSaysFlashAgain(t *testing.T) {
	opts := imageOf(t, "controlplane")
	opts.Hostname = "worker-2"
	srv := nodetest.Start(t, opts)
	want := testMember(t, "worker-2", node.RoleWorker, "worker", "127.0.0.1")
	var rec recorder
	job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
	job.Expect = want
	_, err := CheckApply(context.Background(), job)
	var id *IdentityError
	if !errors.As(err, &id) || !id.WrongImage() {
		t.Fatalf("check: %v", err)
	}
	if fix := id.Fix(); fix != "flash worker-2's card again with the worker image" {
		t.Errorf("fix %q", fix)
	}
	if msg := err.Error(); strings.Contains(msg, "swapped") || strings.Contains(msg, "not worker-2") ||
		!strings.Contains(msg, "booted the controlplane image (the inventory says worker)") || !strings.Contains(msg, id.Fix()) {
		t.Errorf("message %q", msg)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("a request reached the node")
	}
}
