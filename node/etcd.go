package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// An etcd snapshot, taken and checked as talosctl and etcd do it
// (siderolabs/talos v1.14.0-rc.1, etcd-io/etcd v3.6):
//
//   - cmd/talosctl/cmd/talos/etcd.go (etcdSnapshotCmd): MachineService.
//     EtcdSnapshot streamed into FILE.part created with mode 0600, fsynced,
//     its size checked as etcd's client/v3/snapshot/v3_snapshot.go
//     hasChecksum does (size mod 512 == 32: the SHA-256 etcd's maintenance
//     server appends after the database, server/etcdserver/api/v3rpc/
//     maintenance.go Snapshot), renamed to FILE, then etcdutl's status;
//   - etcdutl/snapshot/v3_snapshot.go Status: bbolt's consistency check,
//     the hash (CRC-32C of every bucket name, key and value), the revision
//     (the last key of the "key" bucket) and the live keys (each value a
//     mvccpb.KeyValue; a tombstone revision deletes its key);
//   - etcdutl's restore (copyAndVerifyDB) refuses a snapshot whose
//     trailer is not the SHA-256 of the rest unless --skip-hash-check.
//
// talosflash makes that last check too, on FILE.part before the rename:
// a FILE that exists is one a recovery accepts. The snapshot holds every
// object of the cluster, Secrets included: it is written 0600 and never
// printed, logged or copied anywhere else.

// MaxEtcdSnapshotSize bounds a snapshot read from a node: etcd's largest
// backend quota (8 GiB) and its trailer.
const MaxEtcdSnapshotSize = 8<<30 + sha256.Size

// Errors of the snapshot and the recovery.
var (
	// ErrSnapshotInvalid: a file (or a node's stream) that is not an etcd
	// snapshot a recovery accepts. errors.Is(err, ErrInvalidConfig) (exit 7).
	ErrSnapshotInvalid error = invalidConfig("not a usable etcd snapshot")
	// ErrSnapshotExists: the snapshot's file is there already; talosflash
	// never replaces a snapshot (it may be the only copy of the cluster).
	ErrSnapshotExists = errors.New("the snapshot file exists")
	// ErrEtcdNotRunning: the node's etcd does not run, so it has no
	// snapshot to give. errors.Is(err, ErrRefused) (exit 8).
	ErrEtcdNotRunning error = refusal("etcd does not run on this node")
)

// EtcdSnapshot is a snapshot saved or checked: what etcdutl snapshot
// status says of it, and its trailer.
type EtcdSnapshot struct {
	Path     string
	Size     int64  // the file, its SHA-256 trailer included
	SHA256   string // the trailer (hex): the SHA-256 of the database ("" without one)
	Hash     uint32 // etcdutl's hash: CRC-32C of every bucket name, key and value
	Revision int64  // etcd's revision when it was taken
	Keys     int    // live keys (Kubernetes objects, leases' keys, ...)
	DBSize   int64  // bbolt's size of the database
	Version  string // etcd's storage version ("" when not recorded)
	// Endpoint is the node it was taken from ("" for a file checked).
	Endpoint string
	Took     time.Duration // from the request to the rename
}

// Words says it in a line: "revision 48213, 1204 keys, 1.1 MiB (...)".
func (s *EtcdSnapshot) Words() string {
	return fmt.Sprintf("revision %d, %s, %s", s.Revision, countOf(s.Keys, "key"), humanbytes.Exact(s.Size))
}

func countOf(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// SnapshotOptions shape SaveEtcdSnapshot.
type SnapshotOptions struct {
	// Timeout bounds the whole transfer (default DefaultWaitTimeout);
	// CallTimeout the connection.
	Timeout, CallTimeout time.Duration
	// Progress gets a line when the first bytes arrive and then every
	// 16 MiB (never the data).
	Progress func(string)
}

// SaveEtcdSnapshot streams the etcd snapshot of the control plane at
// endpoint into path as talosctl etcd snapshot does (see the top of this
// file): path.part (0600), fsync, the trailer and etcdutl's checks, then
// the rename. An existing path is refused (ErrSnapshotExists); on any
// failure, a cancel included, neither path nor path.part is left.
func SaveEtcdSnapshot(ctx context.Context, endpoint string, tc *Talosconfig, path string, opts SnapshotOptions) (*EtcdSnapshot, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultWaitTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	if tc == nil {
		return nil, fmt.Errorf("etcd snapshot: %w: none given", ErrTalosconfig)
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%w: %s: talosflash never replaces a snapshot (it may be the only copy of the cluster); choose another name or move it away", ErrSnapshotExists, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	start := time.Now()
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.timeout = opts.CallTimeout

	part := path + ".part"
	// A .part of an earlier run is never written through (it could be a
	// link): removed, then created afresh.
	if err := os.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(part)
		}
	}()
	stopped := func(err error) error {
		if ctx.Err() != nil {
			return &InterruptedError{Op: "etcd snapshot", Endpoint: s.endpoint, Err: ctx.Err(),
				State: fmt.Sprintf("nothing was saved: %s was removed and %s not written; the node is unchanged (a snapshot only reads etcd)", part, path)}
		}
		return err
	}

	tctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	size, err := s.receiveSnapshot(tctx, f, opts.Progress)
	if err != nil {
		return nil, stopped(err)
	}
	// v3_snapshot.go: fsync, then the trailer's size; etcdutl's restore: its hash.
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("etcd snapshot: fsync %s: %w", part, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("etcd snapshot: close %s: %w", part, err)
	}
	snap, err := checkSnapshot(part, false)
	if err != nil {
		return nil, stopped(fmt.Errorf("the snapshot %s sent (%s) fails etcd's checks: %w", s.endpoint, humanbytes.Exact(size), err))
	}
	if ctx.Err() != nil {
		return nil, stopped(ctx.Err())
	}
	if err := os.Rename(part, path); err != nil {
		return nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	done = true
	syncDir(filepath.Dir(path))
	snap.Path, snap.Endpoint, snap.Took = path, s.endpoint, time.Since(start)
	return snap, nil
}

// receiveSnapshot writes the node's EtcdSnapshot stream into w, bounded
// by MaxEtcdSnapshotSize, and returns its size.
func (s *session) receiveSnapshot(ctx context.Context, w io.Writer, progress func(string)) (int64, error) {
	stream, err := s.c.MachineClient.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
	if err != nil {
		return 0, s.snapshotErr(ctx, err)
	}
	var size, said int64
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return size, s.snapshotErr(ctx, err)
		}
		if e := m.GetMetadata().GetError(); e != "" {
			return size, fmt.Errorf("etcd snapshot: %s: %w", s.endpoint, &RefusedError{Endpoint: s.endpoint, Op: "etcd snapshot", Message: sanitize(e)})
		}
		b := m.GetBytes()
		if size+int64(len(b)) > MaxEtcdSnapshotSize {
			return size, fmt.Errorf("%w: %s sent more than %s", ErrSnapshotInvalid, s.endpoint, humanbytes.Exact(MaxEtcdSnapshotSize))
		}
		if _, err := w.Write(b); err != nil {
			return size, fmt.Errorf("etcd snapshot: write: %w", err)
		}
		size += int64(len(b))
		if said == 0 && size > 0 || size-said >= 16<<20 {
			progress(fmt.Sprintf("%s: receiving the etcd snapshot: %s so far", s.endpoint, humanbytes.Exact(size)))
			said = size
		}
	}
	return size, nil
}

// snapshotErr explains a failed EtcdSnapshot: a worker's refusal
// (machinehelper.go CheckControlplane), an etcd that does not answer
// (v1alpha1_server.go EtcdSnapshot: "failed to create etcd client",
// "failed reading etcd snapshot", whatever code the etcd client's error
// carries), the network's.
func (s *session) snapshotErr(ctx context.Context, err error) error {
	st := status.Convert(err)
	msg := sanitize(st.Message())
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case st.Code() == codes.Unimplemented:
		return fmt.Errorf("%w (the node says: %s): take the snapshot from a control plane", ErrNotControlPlane, msg)
	case strings.Contains(msg, "etcd client") || strings.Contains(msg, "reading etcd snapshot"):
		return fmt.Errorf("%w: %s (the node says: %s)", ErrEtcdNotRunning, s.endpoint, msg)
	}
	return fmt.Errorf("etcd snapshot: %w", s.err(ctx, "etcd snapshot", err))
}

// CheckEtcdSnapshot checks a snapshot file as a recovery will: the
// SHA-256 trailer (skipHash: not asked for, as etcdutl's
// --skip-hash-check, for a copy of a member's data directory), then
// etcdutl's status (bbolt's consistency, revision, keys, hash).
func CheckEtcdSnapshot(path string, skipHash bool) (*EtcdSnapshot, error) {
	s, err := checkSnapshot(path, skipHash)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.Path = path
	return s, nil
}

func checkSnapshot(path string, skipHash bool) (*EtcdSnapshot, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrSnapshotInvalid)
	}
	snap := &EtcdSnapshot{Size: st.Size()}
	if !skipHash {
		if snap.SHA256, err = checkTrailer(path, st.Size()); err != nil {
			return nil, err
		}
	}
	if err := snapshotStatus(path, snap); err != nil {
		return nil, err
	}
	return snap, nil
}

// checkTrailer is etcd's: the size says a SHA-256 follows the database
// (v3_snapshot.go hasChecksum), and it is the SHA-256 of the rest
// (copyAndVerifyDB).
func checkTrailer(path string, size int64) (string, error) {
	if size%512 != sha256.Size {
		return "", fmt.Errorf("%w: sha256 checksum not found (size %d; an etcd snapshot is a multiple of 512 bytes and its 32-byte SHA-256): cut short, or not a snapshot", ErrSnapshotInvalid, size)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return "", fmt.Errorf("%w: read: %v", ErrSnapshotInvalid, err)
	}
	trailer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return "", fmt.Errorf("%w: read the trailer: %v", ErrSnapshotInvalid, err)
	}
	if sum := h.Sum(nil); !bytes.Equal(sum, trailer) {
		return "", fmt.Errorf("%w: its SHA-256 trailer %x is not the hash of the database (%x): damaged", ErrSnapshotInvalid, trailer[:6], sum[:6])
	}
	return hex.EncodeToString(trailer), nil
}

// Bucket and key names of etcd's backend (server/storage/schema).
var (
	etcdKeyBucket  = []byte("key")
	etcdMetaBucket = []byte("meta")
	etcdStorageKey = []byte("storageVersion")
)

// etcd's revision keys (server/storage/mvcc/revision.go): 8 bytes main,
// '_', 8 bytes sub, big endian; a tombstone adds 't'.
const (
	revBytesLen       = 17
	markedRevBytesLen = 18
)

// snapshotStatus fills snap as etcdutl snapshot status does (see the top
// of this file).
func snapshotStatus(path string, snap *EtcdSnapshot) error {
	trailer := int64(0)
	if snap.SHA256 != "" {
		trailer = sha256.Size
	}
	// bbolt trusts its file: a database cut short (a page past the file's
	// end is a SIGBUS through bbolt's mapping, fatal) or damaged is refused
	// by a bounded walk first (trailer: the 32 bytes after the database).
	if err := checkBoltFile(path, snap.Size-trailer); err != nil {
		return fmt.Errorf("%w: not a bbolt database, or a damaged one: %v", ErrSnapshotInvalid, err)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("%w: not a bbolt database: %v", ErrSnapshotInvalid, err)
	}
	defer db.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	live := map[string]bool{}
	sawKeys := false
	err = db.View(func(tx *bolt.Tx) error {
		// The walk first, in this goroutine, where a page that points
		// outside the mapping is a panic said as damage (bbolt's Check runs
		// in a goroutine of its own, where it would be fatal).
		if err := faultSafe(func() error {
			snap.DBSize = tx.Size()
			if meta := tx.Bucket(etcdMetaBucket); meta != nil {
				snap.Version = printable(string(meta.Get(etcdStorageKey)), 32)
			}
			c := tx.Cursor()
			for name, _ := c.First(); name != nil; name, _ = c.Next() {
				b := tx.Bucket(name)
				if b == nil {
					return fmt.Errorf("%q is not a bucket", printable(string(name), 64))
				}
				h.Write(name)
				isKey := bytes.Equal(name, etcdKeyBucket)
				sawKeys = sawKeys || isKey
				if err := b.ForEach(func(k, v []byte) error {
					h.Write(k)
					h.Write(v)
					if !isKey {
						return nil
					}
					if len(k) != revBytesLen && len(k) != markedRevBytesLen || k[8] != '_' {
						return fmt.Errorf("revision key of %d bytes", len(k))
					}
					snap.Revision = int64(binary.BigEndian.Uint64(k[:8]))
					key, err := keyOfKeyValue(v)
					if err != nil {
						return err
					}
					if len(k) == markedRevBytesLen && k[revBytesLen] == 't' {
						delete(live, string(key))
					} else {
						live[string(key)] = true
					}
					return nil
				}); err != nil {
					return fmt.Errorf("bucket %q: %w", printable(string(name), 64), err)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		var problems []string
		for e := range tx.Check() {
			if len(problems) < 3 {
				problems = append(problems, e.Error())
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("integrity check failed: %v", problems)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshotInvalid, err)
	}
	if !sawKeys {
		return fmt.Errorf("%w: no %q bucket: a bbolt database, but not etcd's", ErrSnapshotInvalid, etcdKeyBucket)
	}
	snap.Keys, snap.Hash = len(live), h.Sum32()
	return nil
}

// faultSafe runs f with a memory fault (a page of a damaged database
// read through bbolt's mapping) turned into an error.
func faultSafe(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("damaged: %v", r)
		}
	}()
	return f()
}

// keyOfKeyValue is the key (field 1) of an encoded mvccpb.KeyValue.
func keyOfKeyValue(v []byte) ([]byte, error) {
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return nil, errors.New("a value is not an etcd KeyValue")
		}
		v = v[n:]
		if num == 1 && typ == protowire.BytesType {
			key, n := protowire.ConsumeBytes(v)
			if n < 0 {
				return nil, errors.New("a value is not an etcd KeyValue")
			}
			return key, nil
		}
		n = protowire.ConsumeFieldValue(num, typ, v)
		if n < 0 {
			return nil, errors.New("a value is not an etcd KeyValue")
		}
		v = v[n:]
	}
	return nil, errors.New("an etcd KeyValue without its key")
}

// syncDir makes a rename in dir durable (best effort: not every system
// syncs a directory).
func syncDir(dir string) {
	if runtime.GOOS == "windows" {
		return
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
