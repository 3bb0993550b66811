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

// A Ctrl-C that lands before the config is sent (the user stopped during
// the check or the confirmation; on 1.14 between the dry run and the apply)
// says nothing was sent: the node still waits for a config. Only a call cut
// while it is under way may have reached the node.
func TestApplyInterruptedBeforeSendSaysNothingSent(t *testing.T) {
	for _, gen := range []struct {
		name string
		opts nodetest.Options
	}{{"legacy", nodetest.Options{Legacy: true}}, {"1.14", imageOf(t, "worker")}} {
		t.Run(gen.name, func(t *testing.T) {
			srv := nodetest.Start(t, gen.opts)
			var rec recorder
			job := applyJob(srv, "worker.yaml", testkit.Testdata(t, "worker.yaml"), &rec)
			job.Check.Declared = "worker"
			ctx, cancel := context.WithCancel(context.Background())
			job.Event = func(ev ApplyEvent) {
				if ev.Kind == EventPhase && ev.Phase == PhaseSend {
					cancel() // after the 1.14 dry run's answer, before the apply
				}
			}
			_, err := Apply(ctx, job)
			var ie *node.InterruptedError
			if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v", err)
			}
			for _, r := range srv.Requests() {
				if !r.DryRun {
					t.Fatalf("the config was applied after the interrupt (err %v)", err)
				}
			}
			if strings.Contains(err.Error(), "was sent") || strings.Contains(err.Error(), "may have applied") {
				t.Errorf("says the config may have reached the node, it did not: %v", err)
			}
		})
	}
}
