package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/node/nodetest"
)

// etcdSecret is a Secret's value in the fakes' etcd: in the snapshot's
// bytes, never on an output.
const etcdSecret = "NEWT_SECRET=S3cr3tInEtcd42"

// talosctl etcd snapshot's steps through the CLI: FILE (0600) holds the
// cluster's etcd, checked (its trailer is the hash of the rest), its
// revision and keys said, never its content; the JSON line names every
// field docs/JSON.md lists; an existing FILE is refused (exit 2).
func TestEtcdSnapshotCommand(t *testing.T) {
	pki := newTestPKI(t)
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true, Hostname: "cp-1"})
	cp.EtcdPut("/registry/secrets/default/newt", etcdSecret)
	tc, frags := talosconfigFile(t, pki, "os:admin")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")

	code, stdout, stderr := cliRun(t, "etcd", "snapshot", file, "--node", cp.Addr(), "--talosconfig", tc)
	rev, keys := cp.EtcdRevision()
	if code != contract.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(file)
	sum := sha256.Sum256(data[:len(data)-32])
	if st.Mode().Perm() != 0o600 || len(data)%512 != 32 || !bytes.Equal(sum[:], data[len(data)-32:]) || !bytes.Contains(data, []byte(etcdSecret)) {
		t.Fatalf("file: mode %v, %d bytes", st.Mode(), len(data))
	}
	for _, want := range []string{"etcd snapshot of 127.0.0.1 saved to " + file, "revision " + itoa(rev) + ", " + itoa(int64(keys)) + " keys",
		"keep it private", "SHA-256 trailer", "bootstrap --recover-from " + file} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout2, stderr2 := cliRun(t, "etcd", "snapshot", file, "--node", cp.Addr(), "--talosconfig", tc)
	if code != contract.ExitUsage || !strings.Contains(stderr2, "never replaces a snapshot") || cp.EtcdSnapshots() != 1 {
		t.Fatalf("over an existing file: exit %d\n%s", code, stderr2)
	}

	file2 := filepath.Join(dir, "backup-2.db")
	code, stdout3, stderr3 := cliRun(t, "etcd", "snapshot", "--json", "--node", cp.Addr(), "--talosconfig", tc, file2)
	if code != contract.ExitOK {
		t.Fatalf("--json: exit %d\n%s%s", code, stdout3, stderr3)
	}
	var line map[string]any
	if err := json.Unmarshal(answer(t, stdout3, contract.TypeEtcdSnapshot), &line); err != nil {
		t.Fatal(err)
	}
	docRowHas(t, "| `etcd snapshot --json` |", line)
	data2, _ := os.ReadFile(file2)
	sum2 := sha256.Sum256(data2[:len(data2)-32])
	if line["path"] != file2 || line["taken"] != true || line["revision"] != float64(rev) || line["keys"] != float64(keys) || line["mode"] != "0600" ||
		line["sha256"] != hex.EncodeToString(sum2[:]) || line["size"] != float64(len(data2)) {
		t.Fatalf("line %v", line)
	}
	outs := []string{stdout, stderr, stdout2, stderr2, stdout3, stderr3}
	assertNoFragments(t, append(frags, "S3cr3tInEtcd42"), outs...)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Ctrl-C (a real SIGINT, caught as Main catches it) while the snapshot
// streams: exit 130, neither FILE nor FILE.part left, said so.
func TestEtcdSnapshotInterruptedLeavesNoFile(t *testing.T) {
	if !canSignalSelf {
		t.Skip("no signals to this process here")
	}
	pki := newTestPKI(t)
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true, Hostname: "cp-1"})
	cp.StallEtcdSnapshot(4096)
	tc, _ := talosconfigFile(t, pki, "os:admin")
	file := filepath.Join(t.TempDir(), "backup.db")
	stderr := &signalOn{mark: "receiving the etcd snapshot", file: file + ".part"}
	var stdout bytes.Buffer
	start := time.Now()
	code := Main([]string{"etcd", "snapshot", file, "--node", cp.Addr(), "--talosconfig", tc, "--json"}, Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: stderr})
	if code != contract.ExitInterrupted || !stderr.partSeen || time.Since(start) > 15*time.Second {
		t.Fatalf("exit %d (FILE.part seen before the signal: %v)\n%s", code, stderr.partSeen, stderr.text())
	}
	if !strings.Contains(stderr.text(), "nothing was saved") || !strings.Contains(stdout.String(), `"event":"error"`) {
		t.Fatalf("stderr %s\nstdout %s", stderr.text(), stdout.String())
	}
	for _, p := range []string{file, file + ".part"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
}

// signalOn is a stderr that sends this process SIGINT once a line holds
// mark, noting whether file was there then.
type signalOn struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	mark     string
	file     string
	fired    bool
	partSeen bool
}

func (s *signalOn) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if !s.fired && bytes.Contains(p, []byte(s.mark)) {
		s.fired = true
		_, err := os.Stat(s.file)
		s.partSeen = err == nil
		signalSelf(syscall.SIGINT)
	}
	return len(p), nil
}

func (s *signalOn) text() string { s.mu.Lock(); defer s.mu.Unlock(); return s.buf.String() }

// bootstrap --recover-from, as talosctl's: the file checked first (a
// damaged one refused, exit 7, nothing sent), EtcdRecover, then
// Bootstrap{RecoverEtcd}: the fresh control plane's etcd holds the
// snapshot's keys; --json's bootstrap line says from what.
func TestBootstrapRecoverFrom(t *testing.T) {
	pki := newTestPKI(t)
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true, Hostname: "cp-1"})
	cp.EtcdPut("/registry/secrets/default/newt", etcdSecret)
	fresh := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Hostname: "cp-1", RecoverNotReady: 1})
	tc, frags := talosconfigFile(t, pki, "os:admin")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")
	if code, stdout, stderr := cliRun(t, "etcd", "snapshot", file, "--node", cp.Addr(), "--talosconfig", tc); code != contract.ExitOK {
		t.Fatalf("snapshot: exit %d\n%s%s", code, stdout, stderr)
	}
	rev, keys := cp.EtcdRevision()

	data, _ := os.ReadFile(file)
	data[300] ^= 1
	bad := filepath.Join(dir, "bad.db")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cliRun(t, "bootstrap", "--node", fresh.Addr(), "--talosconfig", tc, "--recover-from", bad)
	if code != contract.ExitConfig || !strings.Contains(stderr, "SHA-256 trailer") || fresh.EtcdRecoverCalls() != 0 || fresh.Bootstraps() != 0 {
		t.Fatalf("a damaged snapshot: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := cliRun(t, "bootstrap", "--node", fresh.Addr(), "--talosconfig", tc, "--recover-skip-hash-check"); code != contract.ExitUsage {
		t.Fatalf("--recover-skip-hash-check alone: exit %d %s", code, stderr)
	}

	code, stdout2, stderr2 := cliRun(t, "bootstrap", "--node", fresh.Addr(), "--talosconfig", tc, "--recover-from", file, "--json")
	if code != contract.ExitOK {
		t.Fatalf("recover: exit %d\n%s%s", code, stdout2, stderr2)
	}
	var line map[string]any
	if err := json.Unmarshal(answer(t, stdout2, contract.TypeBootstrap), &line); err != nil {
		t.Fatal(err)
	}
	docRowHas(t, "| `bootstrap --json` |", line)
	if line["recovered_from"] != file || line["snapshot_revision"] != float64(rev) || line["snapshot_keys"] != float64(keys) || line["etcd_healthy"] != true || line["snapshot_uploaded"] != true {
		t.Fatalf("line %v", line)
	}
	if v, ok := fresh.EtcdGet("/registry/secrets/default/newt"); !ok || v != etcdSecret {
		t.Fatal("the Secret was not restored")
	}
	recs := fresh.EtcdRecoveries()
	if len(recs) != 1 || recs[0].SkipHashCheck || recs[0].Revision != rev || fresh.EtcdRecoverCalls() != 2 {
		t.Fatalf("recoveries %+v, uploads %d", recs, fresh.EtcdRecoverCalls())
	}
	if !strings.Contains(stderr2, "not ready for the snapshot yet") || !strings.Contains(stderr2, "recovered at revision") {
		t.Errorf("progress:\n%s", stderr2)
	}
	// A node whose etcd runs is refused before anything is sent.
	code, stdout3, stderr3 := cliRun(t, "bootstrap", "--node", cp.Addr(), "--talosconfig", tc, "--recover-from", file)
	if code != contract.ExitApply || !strings.Contains(stderr3, "nothing was sent") || cp.EtcdRecoverCalls() != 0 {
		t.Fatalf("a running etcd: exit %d\n%s%s", code, stdout3, stderr3)
	}
	assertNoFragments(t, append(frags, "S3cr3tInEtcd42"), stdout, stderr, stdout2, stderr2, stdout3, stderr3)
}

// upgrade --node with a control plane among the nodes saves etcd first,
// beside the talosconfig: the dry run says where and saves nothing; a
// snapshot that cannot be taken stops it before anything is sent;
// --no-snapshot goes on, saying so; workers alone need none.
func TestUpgradeNodeSavesEtcdFirst(t *testing.T) {
	fac, _, _, _ := upgradeFactory(t)
	pki := newTestPKI(t)
	cp := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true, Hostname: "cp-1"})
	wk := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "worker"), Worker: true, Hostname: "worker-1"})
	tc, frags := talosconfigFile(t, pki, "os:admin")
	dir := filepath.Dir(tc)
	args := []string{"upgrade", "--node", wk.Addr() + "," + cp.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--timeout", "30s"}
	saved := func() []string { m, _ := filepath.Glob(filepath.Join(dir, "etcd-home-*.db")); return m }
	var outs []string

	code, stdout, stderr := cliRun(t, append(args, "--dry-run")...)
	outs = append(outs, stdout, stderr)
	if code != contract.ExitOK || !strings.Contains(stdout, "dry run: would save an etcd snapshot of 127.0.0.1 to "+filepath.Join(dir, "etcd-home-")) || len(saved()) != 0 || cp.EtcdSnapshots() != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cliRun(t, append(args, "--snapshot-dir", filepath.Join(dir, "missing"))...)
	outs = append(outs, stdout, stderr)
	if code == contract.ExitOK || !strings.Contains(stderr, "no etcd snapshot could be taken") || !strings.Contains(stderr, "--no-snapshot") ||
		len(wk.Pulled())+len(cp.Pulled()) != 0 {
		t.Fatalf("no snapshot possible: exit %d, pulls %v %v\n%s", code, wk.Pulled(), cp.Pulled(), stderr)
	}
	code, stdout, stderr = cliRun(t, append(args, "--json")...)
	outs = append(outs, stdout, stderr)
	if code != contract.ExitOK || len(saved()) != 1 || cp.RunningVersion() != "v1.14.6" {
		t.Fatalf("upgrade: exit %d, saved %v\n%s%s", code, saved(), stdout, stderr)
	}
	var line map[string]any
	if err := json.Unmarshal(answer(t, stdout, contract.TypeEtcdSnapshot), &line); err != nil || line["path"] != saved()[0] || line["taken"] != true {
		t.Fatalf("etcd_snapshot line %v (%v)", line, err)
	}
	// The snapshot came before anything was sent to either node.
	if i, j := strings.Index(stderr, "etcd snapshot of 127.0.0.1 saved to"), strings.Index(stderr, wk.Addr()+": pulling"); i < 0 || j < i {
		t.Fatalf("the snapshot is not first:\n%s", stderr)
	}
	code, stdout, stderr = cliRun(t, "upgrade", "--node", cp.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--no-snapshot")
	outs = append(outs, stdout, stderr)
	if code != contract.ExitOK || !strings.Contains(stdout, "no etcd snapshot is taken (--no-snapshot)") || cp.EtcdSnapshots() != 1 {
		t.Fatalf("--no-snapshot: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cliRun(t, "upgrade", "--node", wk.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL)
	outs = append(outs, stdout, stderr)
	if code != contract.ExitOK || strings.Contains(stdout, "snapshot") || len(saved()) != 1 {
		t.Fatalf("a worker alone: exit %d\n%s%s", code, stdout, stderr)
	}
	assertNoFragments(t, frags, outs...)
}
