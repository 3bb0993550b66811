package node

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// checkBoltPages reads any bytes without a panic, with reads inside them
// (the walk that makes bbolt safe to run must itself be safe on anything);
// it accepts the database bbolt wrote.
func FuzzCheckBoltPages(f *testing.F) {
	p := filepath.Join(f.TempDir(), "seed.db")
	db, err := bolt.Open(p, 0o600, &bolt.Options{PageSize: 512}) // small pages: a small input to mutate
	if err != nil {
		f.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("meta")); err != nil { // empty: an inline bucket
			return err
		}
		for i := range 120 {
			if err := b.Put([]byte{byte(i >> 8), byte(i)}, bytes.Repeat([]byte{'v'}, 40)); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	if err := checkBoltPages(bytes.NewReader(seed), int64(len(seed))); err != nil {
		f.Fatalf("bbolt's own database refused: %v", err)
	}
	m, err := readBoltMeta(bytes.NewReader(seed), int64(len(seed)))
	if err != nil {
		f.Fatal(err)
	}
	seed = seed[:m.pgid*uint64(m.pageSize)] // the file's room past the high-water mark is unused
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkBoltPages(bytes.NewReader(b), int64(len(b)))
	})
}
