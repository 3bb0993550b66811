package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/node/nodetest"
)

// Adversarial checks of the snapshot and the recovery's file handling:
// where the snapshot may land, and what a recovery reads.

// A database cut at any page, or with a byte flipped every 997 bytes, with
// the hash check skipped (--recover-skip-hash-check: nothing vouches for
// the bytes) is refused as a snapshot, never a crash of talosflash: bbolt
// reads pages through a mapping of the file, where a page past the file's
// end was a SIGBUS and a damaged page pointer a SIGSEGV, both fatal.
func TestCheckEtcdSnapshotSkipHashDamagedNeverPanics(t *testing.T) {
	dir, db := snapshotDatabase(t, 200, func(i int) string { return strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa3(i) }, 300)
	var cases [][]byte
	for cut := 4096; cut < len(db); cut += 4096 {
		cases = append(cases, db[:cut])
	}
	for off := 0; off < len(db); off += 997 {
		b := bytes.Clone(db)
		b[off] ^= 0xff
		cases = append(cases, b)
	}
	for i, b := range cases {
		p := filepath.Join(dir, "case.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("case %d (%d bytes): the check panicked: %v", i, len(b), r)
				}
			}()
			_, _ = CheckEtcdSnapshot(p, true)
		}()
	}
}

// snapshotDatabase is the bbolt database (its SHA-256 trailer cut off) of
// a snapshot taken from the fake control plane holding n more configmaps
// (cm-name(i), values of size bytes), and a folder for the cases.
func snapshotDatabase(t *testing.T, n int, name func(i int) string, size int) (string, []byte) {
	t.Helper()
	cp, _, _, tc := etcdCluster(t, nodetest.NodeOptions{})
	for i := range n {
		cp.EtcdPut("/registry/configmaps/default/cm-"+name(i), strings.Repeat("v", size))
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	if _, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, good, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	return dir, data[:len(data)-sha256.Size]
}

func itoa3(i int) string {
	return string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// The upload sends the bytes that were checked, no more: a file that
// grows after its check (written to while the node is not ready for it)
// is sent only as far as it was checked, so the node restores the
// snapshot that was checked, and an endless writer cannot make the
// upload endless.
func TestRecoverEtcdUploadsOnlyWhatWasChecked(t *testing.T) {
	cp, fresh, _, tc := etcdCluster(t, nodetest.NodeOptions{RecoverNotReady: 1, NotReady: 1})
	path := filepath.Join(t.TempDir(), "etcd.db")
	snap, err := SaveEtcdSnapshot(t.Context(), cp.Addr(), tc, path, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lines progressLog
	w := fastWait(&lines)
	grown := false
	w.Progress = func(s string) {
		lines.add(s)
		if strings.Contains(s, "not ready for the snapshot yet") && !grown {
			grown = true
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = f.Write(bytes.Repeat([]byte{0xa5}, 4096))
			_ = f.Close()
		}
	}
	res, err := RecoverEtcd(t.Context(), fresh.Addr(), tc, path, RecoverOptions{Wait: w})
	if !grown {
		t.Fatal("the node was never not ready")
	}
	if err != nil || !res.EtcdHealthy {
		t.Fatalf("recover: %v\n%s", err, lines.text())
	}
	if recs := fresh.EtcdRecoveries(); len(recs) != 1 || recs[0].Revision != snap.Revision || recs[0].Keys != snap.Keys {
		t.Fatalf("recoveries %+v", recs)
	}
}

// A damaged database that bbolt would follow without end is refused by
// checkBoltPages' bounded walk before bbolt reads it (hash check skipped:
// nothing else vouches for the bytes): a branch page whose child is itself
// (bbolt's cursor and Check recurse forever), a page claiming four billion
// overflow pages (Check's map of reachable pages grows without bound), a
// freelist claiming more ids than its page holds, an element whose key
// ends past its page; and a byte flipped every 61 bytes, where one case
// ran over five minutes in bbolt's Check. Every case ends, in bounded
// time, as a refusal or an accepted snapshot, never a hang or a crash.
func TestCheckEtcdSnapshotSkipHashLoopsAndHugeCountsRefused(t *testing.T) {
	dir, db := snapshotDatabase(t, 200, func(i int) string { return strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa3(i) }, 300)
	const ps = 4096
	pageOf := func(flags uint16) int {
		for id := 2; (id+1)*ps <= len(db); id++ {
			if le16(db[id*ps+8:]) == flags && le16(db[id*ps+10:]) > 0 {
				return id
			}
		}
		t.Fatalf("no page of type %#x in the fixture", flags)
		return 0
	}
	edit := func(f func(b []byte)) []byte { b := bytes.Clone(db); f(b); return b }
	branch, leaf, free := pageOf(boltBranch), pageOf(boltLeaf), pageOf(boltFreelist)
	crafted := map[string][]byte{
		"a branch whose child is itself": edit(func(b []byte) {
			binary.LittleEndian.PutUint64(b[branch*ps+boltPageHeader+8:], uint64(branch))
		}),
		"four billion overflow pages": edit(func(b []byte) { binary.LittleEndian.PutUint32(b[leaf*ps+12:], 0xFFFFFFFF) }),
		"a freelist of more ids than its page holds": edit(func(b []byte) {
			binary.LittleEndian.PutUint16(b[free*ps+10:], 0xFFFF)
			binary.LittleEndian.PutUint64(b[free*ps+boltPageHeader:], 1<<40)
		}),
		"a key past its page": edit(func(b []byte) { binary.LittleEndian.PutUint32(b[leaf*ps+boltPageHeader+4:], 1<<30) }),
	}
	check := func(name string, b []byte) error {
		t.Helper()
		p := filepath.Join(dir, "case.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := CheckEtcdSnapshot(p, true); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the check runs on after 20 s", name)
			return nil
		}
	}
	for name, b := range crafted {
		if err := check(name, b); !errors.Is(err, ErrSnapshotInvalid) || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for off := 0; off < len(db); off += 61 {
		_ = check(fmt.Sprintf("byte %d flipped", off), edit(func(b []byte) { b[off] ^= 0xff }))
	}
}

// The class behind the cases above: with the hash check skipped, any few
// bytes changed anywhere in a real snapshot end as a refusal or an
// accepted snapshot, quickly (a seeded run of 3000 such files through the
// whole check, the page walk and bbolt), never a hang or a crash.
func TestCheckEtcdSnapshotSkipHashAnyFewBytesChanged(t *testing.T) {
	dir, db := snapshotDatabase(t, 60, itoa3, 200)
	r := rand.New(rand.NewPCG(38, 41))
	p := filepath.Join(dir, "case.db")
	deadline := time.Now().Add(2 * time.Minute)
	for i := range 3000 {
		b := bytes.Clone(db)
		for range 1 + r.IntN(6) {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _, _ = CheckEtcdSnapshot(p, true) }()
		select {
		case <-done:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("case %d: the check runs on", i)
		}
	}
}
