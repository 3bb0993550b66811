package nodetest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// etcdNodes are a bootstrapped control plane, a fresh one (etcd waits for
// its bootstrap), a worker, and an admin's talosconfig for all three.
func etcdNodes(t *testing.T, opts nodetest.NodeOptions) (cp, fresh, worker *nodetest.Node, tc []byte, pki *nodetest.PKI) {
	t.Helper()
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	cpSchematic := factory.BuiltinProfiles()[0].Schematic()
	cp = nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: cpSchematic, Bootstrapped: true, Hostname: "cp-1"})
	opts.PKI, opts.Schematic, opts.Hostname = pki, cpSchematic, "cp-1"
	fresh = nodetest.StartNode(t, opts)
	worker = nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Hostname: "worker-1"})
	tc, err = pki.Talosconfig("home", "os:admin", cp.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return cp, fresh, worker, tc, pki
}

func readSnapshot(t *testing.T, c *client.Client) ([]byte, error) {
	t.Helper()
	r, err := c.EtcdSnapshot(t.Context(), &machine.EtcdSnapshotRequest{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 64<<20))
}

// snapshotKeys opens a snapshot as etcd's tools do: the SHA-256 trailer
// over the rest (etcd's size rule: size mod 512 == 32), then bbolt with
// etcd's buckets; the "key" bucket's revisions and their keys.
func snapshotKeys(t *testing.T, data []byte) (rev int64, keys []string, buckets []string) {
	t.Helper()
	if len(data)%512 != sha256.Size {
		t.Fatalf("snapshot of %d bytes: size mod 512 is %d, not 32", len(data), len(data)%512)
	}
	if sum := sha256.Sum256(data[:len(data)-32]); !bytes.Equal(sum[:], data[len(data)-32:]) {
		t.Fatal("the trailer is not the SHA-256 of the database")
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			return e
		}
		c := tx.Cursor()
		for name, _ := c.First(); name != nil; name, _ = c.Next() {
			buckets = append(buckets, string(name))
		}
		return tx.Bucket([]byte("key")).ForEach(func(k, v []byte) error {
			if len(k) != 17 || k[8] != '_' {
				t.Errorf("revision key %x", k)
			}
			rev = int64(binary.BigEndian.Uint64(k[:8]))
			// mvccpb.KeyValue: field 1 (tag 0x0a), its length, the key.
			if len(v) < 2 || v[0] != 0x0a || int(v[1])+2 > len(v) {
				t.Errorf("value %q is not a KeyValue", v)
				return nil
			}
			keys = append(keys, string(v[2:2+int(v[1])]))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return rev, keys, buckets
}

// EtcdSnapshot as Talos serves it (v1alpha1_server.go): a control plane's
// etcd backend, a bbolt database with etcd's buckets and its SHA-256
// trailer; a worker is refused (Unimplemented), a control plane whose etcd
// does not run answers the etcd client's error; os:etcd:backup may take it,
// os:reader may not.
func TestEtcdSnapshotIsEtcdsBackend(t *testing.T) {
	cp, fresh, worker, tc, pki := etcdNodes(t, nodetest.NodeOptions{})
	if !cp.EtcdPut("/registry/secrets/default/tunnel", "NEWT_SECRET=s3cr3t") {
		t.Fatal("no etcd data on a bootstrapped control plane")
	}
	wantRev, wantKeys := cp.EtcdRevision()
	data, err := readSnapshot(t, secureClient(t, cp.Addr(), tc))
	if err != nil {
		t.Fatal(err)
	}
	rev, keys, buckets := snapshotKeys(t, data)
	if rev != wantRev || len(keys) != wantKeys || !slices.Contains(keys, "/registry/secrets/default/tunnel") || !slices.Contains(keys, "/registry/minions/cp-1") {
		t.Fatalf("revision %d (want %d), keys %q (want %d)", rev, wantRev, keys, wantKeys)
	}
	for _, b := range []string{"key", "meta", "lease", "members", "auth"} {
		if !slices.Contains(buckets, b) {
			t.Errorf("no %s bucket: %q", b, buckets)
		}
	}
	if _, err := readSnapshot(t, secureClient(t, worker.Addr(), tc)); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "etcd snapshot is only available on control plane nodes") {
		t.Fatalf("worker: %v", err)
	}
	if _, err := readSnapshot(t, secureClient(t, fresh.Addr(), tc)); err == nil || !strings.Contains(err.Error(), "failed reading etcd snapshot") {
		t.Fatalf("etcd not running: %v", err)
	}
	for role, ok := range map[string]bool{"os:etcd:backup": true, "os:reader": false} {
		rtc, err := pki.Talosconfig("r", role, cp.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readSnapshot(t, secureClient(t, cp.Addr(), rtc)); (err == nil) != ok {
			t.Errorf("%s: %v", role, err)
		}
	}
	if cp.EtcdSnapshots() != 2 || fresh.EtcdSnapshots() != 1 { // os:reader never reaches it
		t.Fatalf("snapshots served: %d, %d", cp.EtcdSnapshots(), fresh.EtcdSnapshots())
	}
}

// The recovery as talosctl bootstrap --recover-from drives it: EtcdRecover
// answers FailedPrecondition until /var is up, then keeps the upload;
// Bootstrap{RecoverEtcd} starts etcd from it, which checks and restores
// it (etcd.go recoverFromSnapshot): the fresh control plane has the
// snapshot's keys at its revision, and its own snapshot holds them.
// A damaged upload fails the etcd service (its trailer), a missing one too;
// a snapshot without its trailer restores only with RecoverSkipHashCheck.
func TestEtcdRecoverRestoresTheSnapshot(t *testing.T) {
	cp, fresh, worker, tc, _ := etcdNodes(t, nodetest.NodeOptions{RecoverNotReady: 1})
	cp.EtcdPut("/registry/configmaps/default/marker", "restored")
	data, err := readSnapshot(t, secureClient(t, cp.Addr(), tc))
	if err != nil {
		t.Fatal(err)
	}
	wantRev, wantKeys := cp.EtcdRevision()
	c := secureClient(t, fresh.Addr(), tc)
	if _, err := c.EtcdRecover(t.Context(), bytes.NewReader(data)); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "etcd service is not ready for recovery yet") {
		t.Fatalf("first upload: %v", err)
	}
	if _, err := secureClient(t, worker.Addr(), tc).EtcdRecover(t.Context(), bytes.NewReader(data)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("worker: %v", err)
	}

	// A damaged snapshot: its trailer no longer matches.
	bad := slices.Clone(data)
	bad[len(bad)-40] ^= 0xff
	if _, err := c.EtcdRecover(t.Context(), bytes.NewReader(bad)); err != nil {
		t.Fatal(err)
	}
	if err := c.Bootstrap(t.Context(), &machine.BootstrapRequest{RecoverEtcd: true}); err != nil {
		t.Fatalf("the bootstrap itself is accepted: %v", err)
	}
	if fresh.Bootstrapped() || !etcdFailed(t, c, "expected sha256") {
		t.Fatal("a damaged snapshot restored")
	}
	// Without the trailer: refused, unless the hash check is skipped.
	bare := data[:len(data)-32]
	for _, skip := range []bool{false, true} {
		if _, err := c.EtcdRecover(t.Context(), bytes.NewReader(bare)); err != nil {
			t.Fatal(err)
		}
		if err := c.Bootstrap(t.Context(), &machine.BootstrapRequest{RecoverEtcd: true, RecoverSkipHashCheck: skip}); err != nil {
			t.Fatal(err)
		}
		if skip != fresh.Bootstrapped() {
			t.Fatalf("skip %v: bootstrapped %v; recoveries %+v", skip, fresh.Bootstrapped(), fresh.EtcdRecoveries())
		}
		if !skip && !etcdFailed(t, c, "snapshot missing hash but --skip-hash-check=false") {
			t.Fatal("no failure said")
		}
	}
	if rev, keys := fresh.EtcdRevision(); rev != wantRev || keys != wantKeys {
		t.Fatalf("restored revision %d, %d keys; want %d, %d", rev, keys, wantRev, wantKeys)
	}
	if v, ok := fresh.EtcdGet("/registry/configmaps/default/marker"); !ok || v != "restored" {
		t.Fatalf("marker %q %v", v, ok)
	}
	// Its etcd runs on the restored data: its own snapshot has the keys.
	again, err := readSnapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if rev, keys, _ := snapshotKeys(t, again); rev != wantRev || len(keys) != wantKeys {
		t.Fatalf("the recovered node's snapshot: revision %d, %d keys", rev, len(keys))
	}
	if err := c.Bootstrap(t.Context(), &machine.BootstrapRequest{RecoverEtcd: true}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second recovery: %v", err)
	}
	recs := fresh.EtcdRecoveries()
	if len(recs) != 3 || recs[2].Revision != wantRev || !recs[2].SkipHashCheck || recs[0].Err == "" || fresh.EtcdRecoverCalls() != 4 {
		t.Fatalf("recoveries %+v, uploads %d", recs, fresh.EtcdRecoverCalls())
	}
}

// waitAPI waits for the node's API after a reboot.
func waitAPI(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	for {
		if _, err := c.Version(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the node's API did not come back")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// etcdFailed: the etcd service is Failed and its last event says want.
func etcdFailed(t *testing.T, c *client.Client, want string) bool {
	t.Helper()
	resp, err := c.ServiceList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range resp.GetMessages()[0].GetServices() {
		if s.GetId() == "etcd" {
			ev := s.GetEvents().GetEvents()
			return s.GetState() == "Failed" && len(ev) > 0 && strings.Contains(ev[len(ev)-1].GetMsg(), want)
		}
	}
	return false
}

// An upgrade whose new installation fails to boot is undone by Talos
// (revert.go): the node boots the new version, its boot sequence fails,
// machined reverts to the installation before (META tag Upgrade) and the
// node comes back on its previous version and schematic. Without the
// failure the upgrade stays and the fallback is dropped once it runs.
func TestFailedUpgradeBootReverts(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	wk := factory.BuiltinProfiles()[1]
	id, _ := wk.SchematicID()
	var (
		mu   sync.Mutex
		logs []string
	)
	logf := func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Schematic: wk.Schematic(), TalosVersion: "v1.14.4", Hostname: "worker-1", Logf: logf})
	tc, err := pki.Talosconfig("home", "os:admin", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c := secureClient(t, n.Addr(), tc)
	upgrade := func(to string) {
		t.Helper()
		ref := "factory.talos.dev/metal-installer/" + id + ":" + to
		ctr := &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_SYSTEM}
		p, err := c.ImageClient.Pull(t.Context(), &machine.ImageServicePullRequest{Containerd: ctr, ImageRef: ref})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := p.Recv(); err == nil; _, err = p.Recv() {
		}
		u, err := c.LifecycleClient.Upgrade(t.Context(), &machine.LifecycleServiceUpgradeRequest{Containerd: ctr, Source: &machine.InstallArtifactsSource{ImageName: ref}})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := u.Recv(); err == nil; _, err = u.Recv() {
		}
		if n.UpgradeFallback() == "" {
			t.Fatal("the installer set no fallback (META tag Upgrade)")
		}
		if err := c.Reboot(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	n.FailUpgradedBoot(`service "kubelet": failed to start: exec format error`)
	upgrade("v1.14.5")
	if err := n.WaitReboots(ctx, 2); err != nil {
		t.Fatalf("the failed boot did not reboot: %v", err)
	}
	if n.RunningVersion() != "v1.14.4" || n.RunningSchematicID() != id || n.Reverts() != 1 || n.UpgradeFallback() != "" {
		t.Fatalf("after the failed boot: %s, schematic %s, %d reverts, fallback %q", n.RunningVersion(), n.RunningSchematicID(), n.Reverts(), n.UpgradeFallback())
	}
	mu.Lock()
	said := strings.Join(logs, "\n")
	mu.Unlock()
	for _, want := range []string{"the new installation failed to boot: service \"kubelet\"", "reverted to v1.14.4 (A)"} {
		if !strings.Contains(said, want) {
			t.Errorf("the node's log lacks %q:\n%s", want, said)
		}
	}

	n.FailUpgradedBoot("")
	waitAPI(ctx, t, c)
	upgrade("v1.14.5")
	if err := n.WaitReboots(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for n.UpgradeFallback() != "" {
		select {
		case <-ctx.Done():
			t.Fatal("the fallback was not dropped once the new installation ran")
		case <-time.After(10 * time.Millisecond):
		}
		_, _ = c.Version(ctx) // a read: the controllers catch up
	}
	if n.RunningVersion() != "v1.14.5" || n.Reverts() != 1 {
		t.Fatalf("after a good boot: %s, %d reverts", n.RunningVersion(), n.Reverts())
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}
