package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// BenchmarkSaveEtcdSnapshot is talosflash etcd snapshot's cost on the
// fake, talosctl's steps (the stream into FILE.part 0600, fsync, the
// trailer's size and hash, etcdutl's status, the rename): a cluster just
// bootstrapped (9 keys) and one with 1000 objects of 1 KiB.
//
//	go test -run '^$' -bench SaveEtcdSnapshot -benchtime 20x ./node
func BenchmarkSaveEtcdSnapshot(b *testing.B) {
	for _, keys := range []int{0, 1000} {
		b.Run(fmt.Sprintf("extra-keys=%d", keys), func(b *testing.B) {
			pki, err := nodetest.NewPKI()
			if err != nil {
				b.Fatal(err)
			}
			cp := nodetest.StartNode(b, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[0].Schematic(), Bootstrapped: true, Hostname: "cp-1"})
			for i := range keys {
				cp.EtcdPut(fmt.Sprintf("/registry/configmaps/default/cm-%04d", i), strings.Repeat("x", 1024))
			}
			dir := b.TempDir()
			data, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
			if err != nil {
				b.Fatal(err)
			}
			p := filepath.Join(dir, "talosconfig")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				b.Fatal(err)
			}
			tc, err := LoadTalosconfig(p, "")
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			b.Run("save", func(b *testing.B) {
				var size int64
				for range b.N {
					n++
					s, err := SaveEtcdSnapshot(b.Context(), cp.Addr(), tc, filepath.Join(dir, fmt.Sprintf("etcd-%d.db", n)), SnapshotOptions{})
					if err != nil {
						b.Fatal(err)
					}
					size = s.Size
				}
				b.ReportMetric(float64(size), "bytes/snapshot")
			})
			// The checks alone (trailer hash, bbolt's check, etcdutl's status).
			b.Run("checks", func(b *testing.B) {
				for range b.N {
					if _, err := CheckEtcdSnapshot(filepath.Join(dir, "etcd-1.db"), false); err != nil {
						b.Fatal(err)
					}
				}
			})
			// Of those, the bounded page walk that runs before bbolt.
			b.Run("page-walk", func(b *testing.B) {
				p := filepath.Join(dir, "etcd-1.db")
				st, err := os.Stat(p)
				if err != nil {
					b.Fatal(err)
				}
				for range b.N {
					if err := checkBoltFile(p, st.Size()-32); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
