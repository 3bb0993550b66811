package plan

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// BenchmarkRolloutSnapshot is what the snapshot adds to a rolling upgrade:
// one control plane (a fake with its Kubernetes API) upgraded with the
// snapshot taken first, and with --no-snapshot; each run on a fresh node.
//
//	go test -run '^$' -bench RolloutSnapshot -benchtime 10x ./app/plan
func BenchmarkRolloutSnapshot(b *testing.B) {
	for _, c := range []struct {
		name string
		skip bool
	}{{"snapshot", false}, {"no-snapshot", true}} {
		b.Run(c.name, func(b *testing.B) {
			fac := upgradeFactory(b)
			for range b.N {
				b.StopTimer()
				n, _, access, tc, _ := oneControlPlane(b, true, func(cfg []byte) []byte { return cfg })
				job := RolloutJob{Nodes: []*Member{testMember(b, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())}, To: "v1.14.6",
					Talosconfig: tc, Factory: fac, Kube: access, NoSnapshot: c.skip, Snapshot: filepath.Join(b.TempDir(), "etcd.db"),
					Wait: node.WaitOptions{Timeout: 20 * time.Second, Every: 10 * time.Millisecond}, Drain: kube.DrainOptions{Timeout: 10 * time.Second},
					Follow: FollowOptions{Wait: 20 * time.Second, WatchOptions: WatchOptions{Interval: 20 * time.Millisecond}}}
				b.StartTimer()
				res, err := Rollout(b.Context(), job)
				b.StopTimer()
				if err != nil || (res.Snapshot.Snapshot != nil) == c.skip {
					b.Fatalf("rollout: %v", err)
				}
			}
		})
	}
}
