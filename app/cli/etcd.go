package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
)

func init() {
	commandHelp["etcd"] = help{
		synopsis: "talosflash etcd snapshot FILE (--inventory FILE | --node IP) --talosconfig FILE [flags]",
		about: "Save the cluster's etcd (every Kubernetes object, Secrets included) into\n" +
			"FILE, from the first control plane whose etcd runs healthy, as talosctl\n" +
			"etcd snapshot does: streamed into FILE.part (created 0600), fsynced,\n" +
			"checked as etcd checks a snapshot (the size says a SHA-256 trailer\n" +
			"follows, and it is the hash of the rest; bbolt consistent), then renamed\n" +
			"to FILE. An existing FILE is never replaced; Ctrl-C leaves neither FILE\n" +
			"nor FILE.part. The snapshot is never printed: keep it as private as the\n" +
			"talosconfig. The way back: talosflash bootstrap --recover-from FILE\n" +
			"(docs/RECOVERY.md).",
		example: "talosflash etcd snapshot etcd-backup.db --inventory talosflash.yaml --talosconfig talos/talosconfig\n" +
			"talosflash etcd snapshot etcd-backup.db --node 192.168.1.20 --talosconfig talosconfig --json",
		order: []string{"inventory", "node", "talosconfig", "context", "timeout", "json"},
	}
}

// etcdFlags are etcd snapshot's flags.
type etcdFlags struct {
	inv, endpoint, profiles string
	port                    int
	tcf                     talosconfigFlags
	timeout                 time.Duration
	jsonOut                 bool
}

func (e *etcdFlags) flagSet(env Env) *flag.FlagSet {
	fs := newFlagSet("etcd", env)
	fs.StringVar(&e.inv, "inventory", "", "cluster inventory (talosflash.yaml): from its first control plane whose etcd is healthy")
	fs.StringVar(&e.endpoint, "node", "", "control plane address (IP or IP:port), instead of --inventory")
	fs.StringVar(&e.endpoint, "n", "", "shorthand for --node")
	fs.StringVar(&e.profiles, "profiles", "", "custom profiles YAML (as the inventory uses)")
	fs.IntVar(&e.port, "port", node.DefaultPort, "with --inventory: the nodes' Talos API port")
	e.tcf.register(fs)
	fs.DurationVar(&e.timeout, "timeout", node.DefaultWaitTimeout, "how long the transfer may take")
	fs.BoolVar(&e.jsonOut, "json", false, "print what was saved as JSON on stdout (never the snapshot); progress on stderr")
	return fs
}

func runEtcd(ctx context.Context, args []string, env Env) error {
	if len(args) > 0 && args[0] == "snapshot" {
		return runEtcdSnapshot(ctx, args[1:], env)
	}
	// Flags before the subcommand (or -h): parsed as snapshot's, so help
	// and a flag's mistake are said as every command says them.
	var e etcdFlags
	if _, err := parseWithArgs(e.flagSet(env), args); err != nil {
		return err
	}
	if len(args) == 0 {
		return usageErrorf("etcd: say snapshot FILE (see: talosflash etcd -h)")
	}
	return usageErrorf("etcd: unknown subcommand %q (snapshot FILE; the recovery is talosflash bootstrap --recover-from FILE)", args[0])
}

func runEtcdSnapshot(ctx context.Context, args []string, env Env) error {
	var e etcdFlags
	files, err := parseWithArgs(e.flagSet(env), args)
	if err != nil {
		return err
	}
	switch {
	case len(files) != 1:
		return usageErrorf("etcd snapshot: name one FILE to save it to (got %d)", len(files))
	case e.inv == "" && e.endpoint == "":
		return usageErrorf("etcd snapshot: give --inventory FILE or --node IP (a control plane)")
	case e.inv != "" && e.endpoint != "":
		return usageErrorf("etcd snapshot: --inventory names the control planes: drop --node")
	case e.port <= 0 || e.port > 65535:
		return usageErrorf("etcd snapshot: --port %d: want 1-65535", e.port)
	}
	tc, err := e.tcf.load("etcd snapshot")
	if err != nil {
		return err
	}
	s, err := loadSettings(plan.Defaults{Inventory: e.inv, ProfilesFile: e.profiles})
	if err != nil {
		return err
	}
	c, err := s.Cluster(e.port, e.endpoint)
	if err != nil {
		return withCode(contract.ExitUsage, err)
	}
	p := newAnswerPrinter(e.jsonOut, env)
	out := p.Human()
	progress := func(line string) { fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05"), line) }
	res, err := plan.TakeSnapshot(ctx, plan.SnapshotJob{Members: c.Members, Talosconfig: tc, Path: files[0], Timeout: e.timeout, Progress: progress})
	if err != nil {
		return waitExit(ctx, err)
	}
	describeSnapshot(out, res)
	return p.Answer(contract.TypeEtcdSnapshot, snapshotJSON(res, false), noText)
}

// describeSnapshot says a snapshot saved: where, what, the checks (never
// its content).
func describeSnapshot(w io.Writer, o *plan.SnapshotOutcome) {
	for _, p := range o.Passed {
		fmt.Fprintf(w, "  passed over: %s\n", p)
	}
	fmt.Fprintln(w, plan.SnapshotWords(o))
	s := o.Snapshot
	version := ""
	if s.Version != "" {
		version = ", storage version " + s.Version
	}
	fmt.Fprintf(w, "  checked as etcd checks a snapshot: its SHA-256 trailer (%s…) is the hash of the database, bbolt consistent%s, hash %08x; written 0600\n",
		s.SHA256[:12], version, s.Hash)
}

// etcdSnapshotLine is the etcd_snapshot JSON line (docs/JSON.md).
type etcdSnapshotLine struct {
	Path     string   `json:"path"`
	Hostname string   `json:"hostname,omitempty"`
	Node     string   `json:"node,omitempty"`
	Taken    bool     `json:"taken"`
	DryRun   bool     `json:"dry_run"`
	Skipped  string   `json:"skipped,omitempty"`
	Size     int64    `json:"size"`
	SHA256   string   `json:"sha256,omitempty"`
	Hash     string   `json:"hash,omitempty"`
	Revision int64    `json:"revision"`
	Keys     int      `json:"keys"`
	DBSize   int64    `json:"db_size"`
	Version  string   `json:"storage_version,omitempty"`
	Mode     string   `json:"mode,omitempty"`
	Seconds  float64  `json:"seconds"`
	Passed   []string `json:"passed_over"`
}

func snapshotJSON(o *plan.SnapshotOutcome, dryRun bool) etcdSnapshotLine {
	l := etcdSnapshotLine{Path: o.Path, DryRun: dryRun, Skipped: o.Skipped, Passed: nonNil(o.Passed)}
	if o.From != nil {
		l.Hostname, l.Node = o.From.Hostname, o.From.Endpoint.String()
	}
	if s := o.Snapshot; s != nil {
		l.Taken, l.Path, l.Size, l.SHA256, l.Hash = true, s.Path, s.Size, s.SHA256, fmt.Sprintf("%08x", s.Hash)
		l.Revision, l.Keys, l.DBSize, l.Version, l.Mode = s.Revision, s.Keys, s.DBSize, s.Version, "0600"
		l.Seconds = s.Took.Seconds()
	}
	return l
}

// snapshotFirstFlags are the rolling upgrade's (and upgrade --node's)
// snapshot flags.
type snapshotFirstFlags struct {
	dir  string
	skip bool
}

func (s *snapshotFirstFlags) register(fs *flag.FlagSet, where string) {
	fs.StringVar(&s.dir, "snapshot-dir", "", "where etcd's snapshot is saved before the first control plane is upgraded (default: "+where+")")
	fs.BoolVar(&s.skip, "no-snapshot", false, "upgrade control planes without saving etcd first (said in the plan)")
}
