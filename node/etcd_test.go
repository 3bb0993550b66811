package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// etcdCluster is a bootstrapped control plane (a Secret in its etcd), a
// fresh control plane (etcd waits for its bootstrap), a worker, and an
// admin talosconfig.
func etcdCluster(t *testing.T, fresh nodetest.NodeOptions) (cp, newCP, worker *nodetest.Node, tc *Talosconfig) {
	t.Helper()
	pki := newPKI(t)
	sc := factory.BuiltinProfiles()[0].Schematic()
	cp = nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: sc, Bootstrapped: true, Hostname: "cp-1"})
	if !cp.EtcdPut("/registry/secrets/default/newt", "NEWT_SECRET=N3wS3cr3t") {
		t.Fatal("no etcd data")
	}
	fresh.PKI, fresh.Schematic, fresh.Hostname = pki, sc, "cp-1"
	newCP = nodetest.StartNode(t, fresh)
	worker = nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Hostname: "worker-1"})
	tc, _ = loadTC(t, pki, "os:admin")
	return cp, newCP, worker, tc
}

// noFiles: neither path nor path.part exists.
func noFiles(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + ".part"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is there (%v)", p, err)
		}
	}
}

// talosctl etcd snapshot's steps: the node's stream into FILE.part
// (0600), fsync, the size rule and (etcdutl's restore) the SHA-256
// trailer, the rename; etcdutl's status says the revision and the live
// keys. An existing FILE is never replaced; a worker and a control plane
// whose etcd does not run are refused, and leave no file.
func TestSaveEtcdSnapshotAsTalosctl(t *testing.T) {
	cp, fresh, worker, tc := etcdCluster(t, nodetest.NodeOptions{})
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.db")
	var lines progressLog
	snap, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, path, SnapshotOptions{Progress: lines.add})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data[:len(data)-32])
	rev, keys := cp.EtcdRevision()
	if st.Mode().Perm() != 0o600 || st.Size() != snap.Size || snap.Size%512 != 32 || snap.SHA256 != hex.EncodeToString(sum[:]) ||
		snap.Revision != rev || snap.Keys != keys || snap.DBSize != snap.Size-32 || snap.Version != "3.6.0" || snap.Endpoint != cp.Addr() || snap.Hash == 0 {
		t.Fatalf("mode %v, snapshot %+v; node revision %d, %d keys", st.Mode(), snap, rev, keys)
	}
	if _, err := os.Lstat(path + ".part"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("FILE.part left: %v", err)
	}
	if !strings.Contains(lines.text(), "receiving the etcd snapshot") || strings.Contains(lines.text(), "N3wS3cr3t") {
		t.Fatalf("progress %q", lines.text())
	}
	if !strings.Contains(string(data), "N3wS3cr3t") {
		t.Fatal("the cluster's Secret is not in the snapshot")
	}
	again, err := CheckEtcdSnapshot(path, false)
	if err != nil || again.Revision != snap.Revision || again.Keys != snap.Keys || again.Hash != snap.Hash || again.SHA256 != snap.SHA256 {
		t.Fatalf("check: %+v, %v", again, err)
	}
	if !strings.Contains(snap.Words(), "revision ") || !strings.Contains(snap.Words(), " keys, ") {
		t.Errorf("words %q", snap.Words())
	}

	// Never over an existing snapshot.
	if _, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, path, SnapshotOptions{}); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("over an existing file: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(data) || cp.EtcdSnapshots() != 1 {
		t.Fatal("the existing snapshot was touched, or the node asked")
	}
	for _, c := range []struct {
		name string
		addr string
		want error
	}{{"worker", worker.Addr(), ErrNotControlPlane}, {"etcd not running", fresh.Addr(), ErrEtcdNotRunning}} {
		p := filepath.Join(dir, c.name+".db")
		if _, err := SaveEtcdSnapshot(t.Context(), c.addr, tc, p, SnapshotOptions{}); !errors.Is(err, c.want) || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v", c.name, err)
		}
		noFiles(t, p)
	}
}

// A cancel (Ctrl-C) while the snapshot streams leaves neither FILE nor
// FILE.part, and says so.
func TestSaveEtcdSnapshotCancelledLeavesNothing(t *testing.T) {
	cp, _, _, tc := etcdCluster(t, nodetest.NodeOptions{})
	cp.StallEtcdSnapshot(4096)
	path := filepath.Join(t.TempDir(), "etcd.db")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	partSeen := false
	_, err := SaveEtcdSnapshot(ctx, cp.Addr(), tc, path, SnapshotOptions{Progress: func(string) {
		// The first bytes are in FILE.part: Ctrl-C now.
		_, err := os.Stat(path + ".part")
		partSeen = err == nil
		cancel()
	}})
	var ie *InterruptedError
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || !strings.Contains(ie.State, "nothing was saved") || !partSeen {
		t.Fatalf("cancelled: %v (FILE.part seen %v)", err, partSeen)
	}
	noFiles(t, path)
}

// What a recovery would refuse, refused first: a file cut short (the size
// rule), a byte changed (the trailer), a bbolt database that is not
// etcd's, junk with a right trailer; a copy without the trailer passes
// only with the hash check skipped.
func TestCheckEtcdSnapshotRefusesDamage(t *testing.T) {
	cp, _, _, tc := etcdCluster(t, nodetest.NodeOptions{})
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	if _, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, good, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(good)
	withTrailer := func(b []byte) []byte { s := sha256.Sum256(b); return append(append([]byte{}, b...), s[:]...) }
	flipped := append([]byte{}, data...)
	flipped[100] ^= 1
	otherDB := filepath.Join(dir, "other.bolt")
	db, err := bolt.Open(otherDB, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("settings")); return err })
	db.Close()
	other, _ := os.ReadFile(otherDB)
	for _, c := range []struct {
		name string
		data []byte
		skip bool
		want string
	}{
		{"cut short", data[:len(data)-100], false, "sha256 checksum not found"},
		{"a byte changed", flipped, false, "SHA-256 trailer"},
		{"another bbolt database", withTrailer(other[:len(other)/512*512]), false, `no "key" bucket`},
		{"junk", withTrailer(make([]byte, 4096)), false, "not a bbolt database"},
		{"no trailer", data[:len(data)-32], false, "sha256 checksum not found"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(p, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := CheckEtcdSnapshot(p, c.skip); !errors.Is(err, ErrSnapshotInvalid) || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	bare := filepath.Join(dir, "no-trailer-skipped")
	if err := os.WriteFile(bare, data[:len(data)-32], 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := CheckEtcdSnapshot(bare, true); err != nil || s.SHA256 != "" || s.Revision == 0 {
		t.Fatalf("skipped hash check: %+v %v", s, err)
	}
}

// talosctl bootstrap --recover-from's steps on the fake: the file
// checked, EtcdRecover retried while the node is not ready for it, then
// Bootstrap{RecoverEtcd}; the fresh control plane's etcd holds the
// snapshot's keys at its revision and is healthy. A node whose etcd runs,
// a worker and a damaged file are refused, the last two before anything
// is sent.
func TestRecoverEtcdFromSnapshot(t *testing.T) {
	cp, fresh, worker, tc := etcdCluster(t, nodetest.NodeOptions{RecoverNotReady: 2, NotReady: 1})
	path := filepath.Join(t.TempDir(), "etcd.db")
	snap, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, path, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lines progressLog
	res, err := RecoverEtcd(t.Context(), fresh.Addr(), tc, path, RecoverOptions{Wait: fastWait(&lines)})
	if err != nil {
		t.Fatalf("recover: %v\n%s", err, lines.text())
	}
	if !res.EtcdHealthy || !res.Accepted || !res.Uploaded || res.Uploads != 3 || res.Attempts != 2 || res.Snapshot.Revision != snap.Revision {
		t.Fatalf("result %+v", res)
	}
	if v, ok := fresh.EtcdGet("/registry/secrets/default/newt"); !ok || v != "NEWT_SECRET=N3wS3cr3t" {
		t.Fatal("the Secret was not restored")
	}
	recs := fresh.EtcdRecoveries()
	if len(recs) != 1 || recs[0].SkipHashCheck || recs[0].Revision != snap.Revision || recs[0].Keys != snap.Keys {
		t.Fatalf("recoveries %+v", recs)
	}
	for _, want := range []string{"not ready for the snapshot yet: etcd service is not ready for recovery yet", "etcd is running and healthy, recovered at revision"} {
		if !strings.Contains(lines.text(), want) {
			t.Errorf("progress lacks %q:\n%s", want, lines.text())
		}
	}
	if strings.Contains(lines.text(), "N3wS3cr3t") {
		t.Fatal("a Secret in the progress")
	}

	// Refusals.
	if _, err := RecoverEtcd(t.Context(), cp.Addr(), tc, path, RecoverOptions{Wait: fastWait(&lines)}); !errors.Is(err, ErrAlreadyBootstrapped) || !strings.Contains(err.Error(), "nothing was sent") || cp.EtcdRecoverCalls() != 0 {
		t.Fatalf("a running etcd: %v", err)
	}
	if _, err := RecoverEtcd(t.Context(), worker.Addr(), tc, path, RecoverOptions{Wait: fastWait(&lines)}); !errors.Is(err, ErrNotControlPlane) || worker.Bootstraps() != 0 {
		t.Fatalf("a worker: %v", err)
	}
	data, _ := os.ReadFile(path)
	data[200] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	calls := fresh.EtcdRecoverCalls()
	if _, err := RecoverEtcd(t.Context(), fresh.Addr(), tc, bad, RecoverOptions{Wait: fastWait(&lines)}); !errors.Is(err, ErrSnapshotInvalid) || !strings.Contains(err.Error(), "nothing was sent") || fresh.EtcdRecoverCalls() != calls {
		t.Fatalf("a damaged file: %v", err)
	}
}
