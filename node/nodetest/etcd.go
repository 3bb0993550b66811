package nodetest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// A control plane's etcd as Talos v1.14.0-rc.1 serves it (see rules114):
//
//   - EtcdSnapshot (internal/app/machined/internal/server/v1alpha1/
//     v1alpha1_server.go): control planes only (machinehelper.go
//     CheckControlplane: Unimplemented "etcd snapshot is only available on
//     control plane nodes"), the local etcd's Maintenance.Snapshot streamed
//     in 1 KiB messages (pkg/chunker/stream: its default size). etcd sends
//     its bbolt backend as a read transaction writes it (etcd
//     server/storage/backend Snapshot, bbolt Tx.WriteTo) and then the
//     SHA-256 of those bytes (server/etcdserver/api/v3rpc/maintenance.go
//     Snapshot): the size modulo 512 is 32. The database has etcd's
//     buckets (server/storage/schema/bucket.go: key, meta, lease, alarm,
//     cluster, members, members_removed, auth, authUsers, authRoles); the
//     "key" bucket maps a revision (8 bytes main, '_', 8 bytes sub, big
//     endian; 't' after a tombstone: mvcc/revision.go) to a mvccpb.KeyValue
//     (api/mvccpb/kv.proto: key 1, create_revision 2, mod_revision 3,
//     version 4, value 5). Without a running etcd the etcd client's error
//     comes back ("failed reading etcd snapshot: ...").
//   - EtcdRecover: FailedPrecondition "etcd service is not ready for
//     recovery yet" until /var is mounted (NodeOptions.RecoverNotReady
//     calls here), control planes only, the upload kept as
//     /var/lib/etcd.snapshot.
//   - Bootstrap{RecoverEtcd} (system/services/etcd.go BootstrapEtcd,
//     recoverFromSnapshot): answered once etcd restarts in bootstrap
//     mode; its pre-start step then checks the upload as etcdutl does
//     (snapshot status, then restore: the SHA-256 trailer unless
//     RecoverSkipHashCheck: "snapshot missing hash but
//     --skip-hash-check=false", "expected sha256 ..., got ..."), restores
//     its keys, deletes the upload and starts etcd. A failure there is the
//     etcd service's (state Failed, "Failed to run pre stage: ..."), not
//     Bootstrap's answer.
//
// This checks a snapshot on its own (it does not share talosflash's
// node/etcd.go): the fake and the client verify each other.

// etcdKV is one key of etcd (its latest revision).
type etcdKV struct {
	key, value            []byte
	create, mod, versions int64
}

// etcdStore is a control plane's etcd data.
type etcdStore struct {
	rev int64
	kvs map[string]*etcdKV
}

func (s *etcdStore) put(key, value string) {
	s.rev++
	kv := s.kvs[key]
	if kv == nil {
		kv = &etcdKV{key: []byte(key), create: s.rev}
		s.kvs[key] = kv
	}
	kv.value, kv.mod = []byte(value), s.rev
	kv.versions++
}

func (s *etcdStore) clone() *etcdStore {
	c := &etcdStore{rev: s.rev, kvs: map[string]*etcdKV{}}
	for k, v := range s.kvs {
		cp := *v
		c.kvs[k] = &cp
	}
	return c
}

// newEtcdStore is what a freshly bootstrapped cluster writes first:
// namespaces, the kubernetes service, a service account, the control
// plane's Node and a bootstrap token Secret (its secret random).
func newEtcdStore(nodename string) *etcdStore {
	s := &etcdStore{kvs: map[string]*etcdKV{}}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	for _, ns := range []string{"default", "kube-node-lease", "kube-public", "kube-system"} {
		s.put("/registry/namespaces/"+ns, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"`+ns+`"}}`)
	}
	s.put("/registry/services/specs/default/kubernetes", `{"kind":"Service","apiVersion":"v1","metadata":{"name":"kubernetes","namespace":"default"}}`)
	s.put("/registry/serviceaccounts/kube-system/default", `{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"default","namespace":"kube-system"}}`)
	s.put("/registry/minions/"+nodename, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"`+nodename+`"}}`)
	id := hex.EncodeToString(tok[:3])
	s.put("/registry/secrets/kube-system/bootstrap-token-"+id,
		`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"bootstrap-token-`+id+`","namespace":"kube-system"},"data":{"token-secret":"`+hex.EncodeToString(tok[3:])+`"}}`)
	return s
}

// etcdMemberID is the fake member's ID (EtcdMemberList's).
const etcdMemberID = 0x2a5c9e01b7d4f3c8

// etcd's buckets (server/storage/schema/bucket.go).
var etcdBuckets = []string{"key", "meta", "lease", "alarm", "cluster", "members", "members_removed", "auth", "authUsers", "authRoles"}

// revKey is etcd's revision key: main and sub, big endian, '_' between.
func revKey(main, sub int64) []byte {
	b := make([]byte, 17)
	binary.BigEndian.PutUint64(b, uint64(main))
	b[8] = '_'
	binary.BigEndian.PutUint64(b[9:], uint64(sub))
	return b
}

// encodeKV is a mvccpb.KeyValue's wire form.
func encodeKV(kv *etcdKV) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, kv.key)
	for _, f := range []struct {
		n protowire.Number
		v int64
	}{{2, kv.create}, {3, kv.mod}, {4, kv.versions}} {
		b = protowire.AppendTag(b, f.n, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(f.v))
	}
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	return protowire.AppendBytes(b, kv.value)
}

// decodeKV reads a mvccpb.KeyValue.
func decodeKV(b []byte) (*etcdKV, error) {
	kv := &etcdKV{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errors.New("proto: bad tag")
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 5):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, errors.New("proto: bad bytes")
			}
			if num == 1 {
				kv.key = slices.Clone(v)
			} else {
				kv.value = slices.Clone(v)
			}
			b = b[n:]
		case typ == protowire.VarintType && num >= 2 && num <= 4:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, errors.New("proto: bad varint")
			}
			switch num {
			case 2:
				kv.create = int64(v)
			case 3:
				kv.mod = int64(v)
			case 4:
				kv.versions = int64(v)
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, errors.New("proto: bad field")
			}
			b = b[n:]
		}
	}
	return kv, nil
}

// snapshot is what etcd's Maintenance.Snapshot sends: the bbolt database
// as a read transaction writes it, then its SHA-256.
func (s *etcdStore) snapshot(member, peerURL string) ([]byte, error) {
	f, err := os.CreateTemp("", "nodetest-etcd-*.db")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: true}) // a temporary file: no fsync
	if err != nil {
		return nil, err
	}
	defer db.Close()
	keys := make([]string, 0, len(s.kvs))
	for k := range s.kvs {
		keys = append(keys, k)
	}
	// The key bucket is ordered by revision: each key at its last one.
	sort.Slice(keys, func(i, j int) bool { return s.kvs[keys[i]].mod < s.kvs[keys[j]].mod })
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range etcdBuckets {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		kb := tx.Bucket([]byte("key"))
		for _, k := range keys {
			kv := s.kvs[k]
			if err := kb.Put(revKey(kv.mod, 0), encodeKV(kv)); err != nil {
				return err
			}
		}
		be := func(v int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(v)); return b }
		meta := tx.Bucket([]byte("meta"))
		for k, v := range map[string][]byte{"consistent_index": be(s.rev + 3), "term": be(2), "storageVersion": []byte("3.6.0"),
			"finishedCompactRev": be(1), "scheduledCompactRev": be(1)} {
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		m, _ := json.Marshal(map[string]any{"id": etcdMemberID, "peerURLs": []string{peerURL}, "name": member})
		if err := tx.Bucket([]byte("members")).Put(fmt.Appendf(nil, "%x", etcdMemberID), m); err != nil {
			return err
		}
		if err := tx.Bucket([]byte("cluster")).Put([]byte("clusterVersion"), []byte("3.6.0")); err != nil {
			return err
		}
		return tx.Bucket([]byte("auth")).Put([]byte("authEnabled"), []byte{0})
	})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(&buf); return err }); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return append(buf.Bytes(), sum[:]...), nil
}

// restoreSnapshot is the etcd service's pre-start step on a recovery
// (see the top of this file): status, the trailer, then the keys.
func restoreSnapshot(data []byte, skipHash bool) (*etcdStore, error) {
	if data == nil {
		return nil, errors.New("error verifying snapshot: stat /var/lib/etcd.snapshot: no such file or directory")
	}
	f, err := os.CreateTemp("", "nodetest-etcd-recover-*.db")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	defer os.Remove(path)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	store := &etcdStore{kvs: map[string]*etcdKV{}}
	read := func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error {
			for e := range tx.Check() {
				return fmt.Errorf("snapshot file integrity check failed: %v", e)
			}
			kb := tx.Bucket([]byte("key"))
			if kb == nil {
				return errors.New("no key bucket")
			}
			return kb.ForEach(func(k, v []byte) error {
				if len(k) != 17 && len(k) != 18 {
					return fmt.Errorf("cannot parse revision key: %q", k)
				}
				kv, err := decodeKV(v)
				if err != nil {
					return fmt.Errorf("cannot unmarshal value, key: %q err: %w", k, err)
				}
				store.rev = int64(binary.BigEndian.Uint64(k[:8]))
				if len(k) == 18 && k[17] == 't' {
					delete(store.kvs, string(kv.key))
				} else {
					store.kvs[string(kv.key)] = kv
				}
				return nil
			})
		})
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("error verifying snapshot: %w", err)
	}
	err = read(db)
	db.Close()
	if err != nil {
		return nil, fmt.Errorf("error verifying snapshot: %w", err)
	}
	// etcdutl's restore (copyAndVerifyDB): the trailer.
	hasHash := len(data)%512 == sha256.Size
	switch {
	case !hasHash && !skipHash:
		return nil, errors.New("error recovering from the snapshot: snapshot missing hash but --skip-hash-check=false")
	case hasHash && !skipHash:
		db, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
		if sum := sha256.Sum256(db); !bytes.Equal(sum[:], trailer) {
			return nil, fmt.Errorf("error recovering from the snapshot: expected sha256 %v, got %v", trailer, sum[:])
		}
	}
	return store, nil
}

// EtcdSnapshot is v1alpha1_server.go's (see the top of this file).
func (n *Node) EtcdSnapshot(_ *machine.EtcdSnapshotRequest, srv grpc.ServerStreamingServer[common.Data]) error {
	if n.opts.Worker {
		return status.Error(codes.Unimplemented, "etcd snapshot is only available on control plane nodes")
	}
	n.mu.Lock()
	n.snapshots++
	var store *etcdStore
	if n.bootstrapped && n.etcd != nil && n.etcdFailure == "" {
		store = n.etcd.clone()
	}
	stall := n.snapshotStall
	member, _, _ := strings.Cut(n.hostname, ".")
	n.mu.Unlock()
	if store == nil {
		return status.Error(codes.Unavailable, `failed reading etcd snapshot: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp [::1]:2379: connect: connection refused"`)
	}
	data, err := store.snapshot(member, "https://"+n.ip()+":2380")
	if err != nil {
		return status.Errorf(codes.Internal, "failed reading etcd snapshot: %v", err)
	}
	n.opts.Logf("EtcdSnapshot: %d bytes, revision %d, %d keys", len(data), store.rev, len(store.kvs))
	for off := 0; off < len(data); off += 1024 {
		if stall > 0 && off >= stall {
			// StallEtcdSnapshot: the rest never comes; the stream ends
			// when the client goes away.
			<-srv.Context().Done()
			return srv.Context().Err()
		}
		if err := srv.Send(&common.Data{Bytes: data[off:min(off+1024, len(data))]}); err != nil {
			return err
		}
	}
	return nil
}

// EtcdRecover is v1alpha1_server.go's (see the top of this file).
func (n *Node) EtcdRecover(srv grpc.ClientStreamingServer[common.Data, machine.EtcdRecoverResponse]) error {
	n.mu.Lock()
	notReady := n.recoverNotReady > 0
	if notReady {
		n.recoverNotReady--
	}
	n.recoverCalls++
	n.mu.Unlock()
	if notReady {
		return status.Error(codes.FailedPrecondition, "etcd service is not ready for recovery yet")
	}
	if n.opts.Worker {
		return status.Error(codes.Unimplemented, "etcd recover is only available on control plane nodes")
	}
	var buf bytes.Buffer
	for {
		m, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if buf.Len()+len(m.GetBytes()) > 1<<30 {
			return status.Error(codes.ResourceExhausted, "error writing snapshot: no space left on device")
		}
		buf.Write(m.GetBytes())
	}
	n.mu.Lock()
	n.recoverUpload = buf.Bytes()
	n.mu.Unlock()
	n.opts.Logf("EtcdRecover: %d bytes uploaded", buf.Len())
	return srv.SendAndClose(&machine.EtcdRecoverResponse{Messages: []*machine.EtcdRecover{{}}})
}

// recoverLocked is the etcd service's start in bootstrap mode with
// RecoverEtcd (caller holds n.mu; the bootstrap was allowed).
func (n *Node) recoverLocked(skipHash bool) {
	store, err := restoreSnapshot(n.recoverUpload, skipHash)
	rec := EtcdRecovery{SkipHashCheck: skipHash, Uploaded: len(n.recoverUpload)}
	if err != nil {
		n.etcdFailure = "Failed to run pre stage: " + err.Error()
		rec.Err = err.Error()
		n.recoveries = append(n.recoveries, rec)
		n.opts.Logf("etcd recovery: %v", err)
		return
	}
	rec.Revision, rec.Keys = store.rev, len(store.kvs)
	n.recoveries = append(n.recoveries, rec)
	n.etcd, n.etcdFailure, n.recoverUpload, n.bootstrapped = store, "", nil, true
	n.opts.Logf("etcd recovered from the snapshot: revision %d, %d keys", store.rev, len(store.kvs))
}

// EtcdRecovery is one recovery a node ran (Bootstrap with RecoverEtcd).
type EtcdRecovery struct {
	SkipHashCheck bool
	Uploaded      int    // bytes of the upload it found (0: none)
	Revision      int64  // restored (0: failed)
	Keys          int    // restored
	Err           string // the etcd service's failure ("" restored)
}

// EtcdRecoveries lists the recoveries the node ran.
func (n *Node) EtcdRecoveries() []EtcdRecovery {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.recoveries)
}

// EtcdRecoverCalls counts EtcdRecover calls (uploads).
func (n *Node) EtcdRecoverCalls() int { n.mu.Lock(); defer n.mu.Unlock(); return n.recoverCalls }

// EtcdSnapshots counts EtcdSnapshot calls.
func (n *Node) EtcdSnapshots() int { n.mu.Lock(); defer n.mu.Unlock(); return n.snapshots }

// EtcdPut writes a key into the control plane's etcd (a new revision), as
// the cluster's API would; false when etcd has no data yet.
func (n *Node) EtcdPut(key, value string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.etcd == nil {
		return false
	}
	n.etcd.put(key, value)
	return true
}

// EtcdGet is a key's value in the node's etcd.
func (n *Node) EtcdGet(key string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.etcd == nil {
		return "", false
	}
	kv, ok := n.etcd.kvs[key]
	if !ok {
		return "", false
	}
	return string(kv.value), true
}

// EtcdRevision is the node's etcd revision and key count (0, 0: no data).
func (n *Node) EtcdRevision() (int64, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.etcd == nil {
		return 0, 0
	}
	return n.etcd.rev, len(n.etcd.kvs)
}

// StallEtcdSnapshot makes the node's next snapshots stop after about
// bytes (whole 1 KiB messages) until the client goes away (0: never).
func (n *Node) StallEtcdSnapshot(bytes int) { n.mu.Lock(); n.snapshotStall = bytes; n.mu.Unlock() }

// seedEtcdLocked gives a bootstrapped etcd its first keys (caller holds n.mu).
func (n *Node) seedEtcdLocked() {
	if n.etcd == nil && !n.opts.Worker {
		host, _, _ := strings.Cut(n.hostname, ".")
		n.etcd = newEtcdStore(strings.ToLower(host))
	}
}
