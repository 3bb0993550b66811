package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/node"
)

func init() {
	commandHelp["bootstrap"] = help{
		synopsis: "talosflash bootstrap --node IP --talosconfig FILE [--recover-from SNAPSHOT] [flags]",
		about: "After the control plane config is applied: wait for the node to come back\n" +
			"with its config (its API answering with the talosconfig's client\n" +
			"certificate), then bootstrap etcd once, like talosctl bootstrap, and wait\n" +
			"for etcd to be healthy. A node whose etcd already runs or has data is\n" +
			"refused (exit 8): bootstrapping twice splits the cluster.\n\n" +
			"With --recover-from FILE: bring the cluster's etcd back from a snapshot\n" +
			"(talosflash etcd snapshot, talosctl etcd snapshot), as talosctl bootstrap\n" +
			"--recover-from does: the file checked first as etcd will (its SHA-256\n" +
			"trailer, bbolt consistent), uploaded (EtcdRecover), then the bootstrap\n" +
			"with RecoverEtcd; on a control plane whose etcd waits for its bootstrap\n" +
			"(its card flashed again and its config applied: docs/RECOVERY.md).",
		example: "talosflash bootstrap --node 192.168.1.50 --talosconfig talosconfig\n" +
			"talosflash bootstrap --node 192.168.1.50 --talosconfig talosconfig --recover-from etcd-backup.db",
		order: []string{"node", "talosconfig", "recover-from", "context", "timeout", "json"},
	}
	placeholders["talosconfig"] = "FILE"
	placeholders["context"] = "NAME"
	placeholders["to"] = "VERSION"
	placeholders["recover-from"] = "FILE"
	placeholders["snapshot-dir"] = "DIR"
}

// talosconfigFlags are the flags of the commands that use the cluster's
// credentials (talosctl's names).
type talosconfigFlags struct{ path, context string }

func (t *talosconfigFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.path, "talosconfig", os.Getenv("TALOSCONFIG"), "talosconfig from talosctl gen config (default $TALOSCONFIG)")
	fs.StringVar(&t.context, "context", "", "context in the talosconfig (default: its current context)")
}

// load reads the talosconfig; its errors never quote the file (keys).
func (t *talosconfigFlags) load(cmd string) (*node.Talosconfig, error) {
	if t.path == "" {
		return nil, usageErrorf("%s: --talosconfig is required, or $TALOSCONFIG (the file talosctl gen config wrote next to controlplane.yaml)", cmd)
	}
	tc, err := node.LoadTalosconfig(t.path, t.context)
	if err != nil {
		return nil, withCode(contract.ExitUsage, err)
	}
	return tc, nil
}

func runBootstrap(ctx context.Context, args []string, env Env) error {
	var (
		endpoint, recoverFrom string
		tcf                   talosconfigFlags
		timeout               time.Duration
		jsonOut, skipHash     bool
	)
	fs := newFlagSet("bootstrap", env)
	fs.StringVar(&recoverFrom, "recover-from", "", "recover etcd from this snapshot file (talosflash etcd snapshot) instead of a new cluster")
	fs.BoolVar(&skipHash, "recover-skip-hash-check", false, "with --recover-from: the file is a copy of a member's data directory, without a snapshot's SHA-256 trailer")
	fs.StringVar(&endpoint, "node", "", "control plane node address (IP or IP:port), as talosctl -n")
	fs.StringVar(&endpoint, "n", "", "shorthand for --node")
	tcf.register(fs)
	fs.DurationVar(&timeout, "timeout", node.DefaultWaitTimeout, "how long to wait for the node and for etcd")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON on stdout (progress stays on stderr)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if endpoint == "" {
		return usageErrorf("bootstrap: --node is required")
	}
	if skipHash && recoverFrom == "" {
		return usageErrorf("bootstrap: --recover-skip-hash-check goes with --recover-from FILE")
	}
	c, err := plan.ClusterAt(nil, endpoint)
	if err != nil {
		return err
	}
	tc, err := tcf.load("bootstrap")
	if err != nil {
		return err
	}
	p := newBootstrapPrinter(jsonOut, env, tcf.path)
	warnNotAdmin(env, tc)
	if recoverFrom != "" {
		res, err := plan.Recover(ctx, plan.RecoverJob{Node: c.Members[0], Talosconfig: tc, Snapshot: recoverFrom, SkipHashCheck: skipHash,
			Wait: node.WaitOptions{Timeout: timeout, Progress: p.Progress}})
		return p.Recovered(ctx, res, err)
	}
	out, err := plan.Bootstrap(ctx, plan.BootstrapJob{Node: c.Members[0], Talosconfig: tc, Wait: node.WaitOptions{
		Timeout:  timeout,
		Progress: p.Progress,
	}})
	return p.Done(ctx, out.BootstrapResult, err)
}

// bootstrapPrinter shows `talosflash bootstrap` (plan.Bootstrap): a text
// and a JSON printer.
type bootstrapPrinter interface {
	Progress(line string)
	// Done shows the result (res: what was sent, nil when nothing was)
	// and returns the command's error.
	Done(ctx context.Context, res *node.BootstrapResult, err error) error
	// Recovered is Done for --recover-from.
	Recovered(ctx context.Context, res *node.RecoverResult, err error) error
}

func newBootstrapPrinter(jsonOut bool, env Env, tcPath string) bootstrapPrinter {
	if jsonOut {
		return &bootstrapJSON{env: env}
	}
	return &bootstrapText{env: env, tcPath: tcPath}
}

// bootstrapText: progress and the result on stdout.
type bootstrapText struct {
	env    Env
	tcPath string
}

func (p *bootstrapText) Progress(s string) {
	fmt.Fprintf(p.env.Stdout, "%s %s\n", time.Now().Format("15:04:05"), s)
}

func (p *bootstrapText) Done(ctx context.Context, res *node.BootstrapResult, err error) error {
	if err != nil {
		return waitExit(ctx, err)
	}
	fmt.Fprintf(p.env.Stdout, "bootstrapped etcd on %s (Talos %s). Next: talosflash kubeconfig --node %s --talosconfig %s (or %s)\n",
		res.Endpoint, res.TalosVersion, res.Endpoint, devices.ShellJoin([]string{p.tcPath}), node.Talosctl(p.tcPath, res.Endpoint, "kubeconfig"))
	return nil
}

func (p *bootstrapText) Recovered(ctx context.Context, res *node.RecoverResult, err error) error {
	if err != nil {
		var ie *node.InterruptedError
		if res != nil && !errors.As(err, &ie) && (res.Uploads > 0 || res.Attempts > 0) {
			fmt.Fprintf(p.env.Stdout, "%s\n", res.State())
		}
		return waitExit(ctx, err)
	}
	fmt.Fprintf(p.env.Stdout, "recovered etcd on %s (Talos %s) from %s: %s. Next: talosflash status --node %s --talosconfig %s; the other control planes join it as they boot\n",
		res.Endpoint, res.TalosVersion, res.Snapshot.Path, res.Snapshot.Words(), res.Endpoint, devices.ShellJoin([]string{p.tcPath}))
	return nil
}

// bootstrapJSON: progress on stderr, the result as one JSON line on
// stdout (also when it failed after sending something).
type bootstrapJSON struct{ env Env }

func (p *bootstrapJSON) Progress(s string) {
	fmt.Fprintf(p.env.Stderr, "%s %s\n", time.Now().Format("15:04:05"), s)
}

func (p *bootstrapJSON) Done(ctx context.Context, res *node.BootstrapResult, err error) error {
	if res != nil {
		j := map[string]any{
			"node": res.Endpoint, "talos_version": res.TalosVersion, "attempts": res.Attempts, "etcd_healthy": res.EtcdHealthy,
			"bootstrap_sent": res.Attempts > 0, "accepted": res.Accepted,
		}
		var ie *node.InterruptedError
		if errors.As(err, &ie) {
			j["interrupted"] = ie.State // what was sent, the state of the node
		}
		if jerr := contract.WriteAnswer(p.env.Stdout, contract.TypeBootstrap, j); jerr != nil && err == nil {
			return jerr
		}
	}
	return waitExit(ctx, err)
}

func (p *bootstrapJSON) Recovered(ctx context.Context, res *node.RecoverResult, err error) error {
	if res != nil {
		j := map[string]any{
			"node": res.Endpoint, "talos_version": res.TalosVersion, "attempts": res.Attempts, "etcd_healthy": res.EtcdHealthy,
			"bootstrap_sent": res.Attempts > 0, "accepted": res.Accepted,
			"recovered_from": res.Snapshot.Path, "snapshot_revision": res.Snapshot.Revision, "snapshot_keys": res.Snapshot.Keys,
			"snapshot_uploaded": res.Uploaded,
		}
		var ie *node.InterruptedError
		if errors.As(err, &ie) {
			j["interrupted"] = ie.State
		}
		if jerr := contract.WriteAnswer(p.env.Stdout, contract.TypeBootstrap, j); jerr != nil && err == nil {
			return jerr
		}
	}
	return waitExit(ctx, err)
}

func warnNotAdmin(env Env, tc *node.Talosconfig) {
	if !tc.IsAdmin() {
		fmt.Fprintf(env.Stderr, "warning: the client certificate of %s has roles %v, not os:admin: the node will refuse bootstrap and upgrade\n", tc, tc.Roles)
	}
}

// waitExit gives a wait that ran out of time (the node never answered or
// never became healthy) the network exit code, and a node that does not
// report its schematic, a missing extension or a downgrade the usage one
// (talosflash will not do it; talosctl can), and a snapshot's file that
// exists the usage one too (another name).
func waitExit(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return withCode(contract.ExitNetwork, err)
	case errors.Is(err, node.ErrNoSchematic), errors.Is(err, node.ErrExtensionMissing), errors.Is(err, node.ErrDowngrade),
		errors.Is(err, node.ErrSnapshotExists):
		return withCode(contract.ExitUsage, err)
	}
	return err
}
