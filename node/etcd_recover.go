package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The recovery of a cluster's etcd from a snapshot, as talosctl bootstrap
// --recover-from does it (siderolabs/talos v1.14.0-rc.1):
//
//   - cmd/talosctl/cmd/talos/bootstrap.go: the file checked first
//     (etcdutl's snapshot status), MachineService.EtcdRecover uploads it,
//     then MachineService.Bootstrap{RecoverEtcd: true,
//     RecoverSkipHashCheck: --recover-skip-hash-check (default false)};
//   - internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go:
//     EtcdRecover answers FailedPrecondition "etcd service is not ready for
//     recovery yet" until /var is mounted, is for control planes only
//     (machinehelper.go CheckControlplane), and writes the upload to
//     /var/lib/etcd.snapshot; Bootstrap refuses a node whose etcd data
//     directory is not empty (AlreadyExists);
//   - internal/app/machined/pkg/system/services/etcd.go (BootstrapEtcd,
//     recoverFromSnapshot): etcd restarts in bootstrap mode, its pre-start
//     step checks and restores the snapshot (etcdutl's restore: the SHA-256
//     trailer unless RecoverSkipHashCheck), deletes the upload and starts
//     etcd on it: a failure there is the etcd service's, not Bootstrap's
//     answer;
//   - internal/integration/api/etcd-recover.go: the upload and the
//     bootstrap are retried while the node answers FailedPrecondition.
//
// talosflash checks the file as a recovery will (CheckEtcdSnapshot: the
// trailer too, which talosctl leaves to the node), refuses a node whose
// etcd runs before anything is sent, and waits for etcd to be healthy.

// RecoverOptions shape RecoverEtcd.
type RecoverOptions struct {
	Wait WaitOptions
	// SkipHashCheck: the file has no SHA-256 trailer (a copy of a member's
	// data directory, not a snapshot): talosctl's --recover-skip-hash-check.
	SkipHashCheck bool
}

// RecoverResult is what RecoverEtcd did.
type RecoverResult struct {
	BootstrapResult
	Snapshot *EtcdSnapshot // the file, checked
	Uploads  int           // EtcdRecover calls sent
	Uploaded bool          // the node took the snapshot
}

// State says what was sent and the state the node is in.
func (r *RecoverResult) State() string {
	switch {
	case r.Attempts > 0:
		return r.BootstrapResult.State()
	case r.Uploaded:
		return "the snapshot was uploaded (EtcdRecover) but no bootstrap was sent: etcd still waits for it; run talosflash bootstrap --recover-from again"
	case r.Uploads > 0:
		return "the snapshot's upload was sent and not completed: etcd was not recovered; run talosflash bootstrap --recover-from again"
	}
	return "nothing was sent: etcd was not recovered"
}

// RecoverEtcd brings a fresh control plane's etcd back from the snapshot
// at path (see the top of this file): the file checked, the node waited
// for (its API with the talosconfig, stage booting or running), a node
// whose etcd runs refused (ErrAlreadyBootstrapped, nothing sent), the
// snapshot uploaded, Bootstrap with RecoverEtcd, then the wait for etcd
// to be healthy. A Ctrl-C says what was sent (*InterruptedError).
func RecoverEtcd(ctx context.Context, endpoint string, tc *Talosconfig, path string, opts RecoverOptions) (*RecoverResult, error) {
	w := opts.Wait.withDefaults()
	if tc == nil {
		return nil, fmt.Errorf("recover: %w: none given", ErrTalosconfig)
	}
	snap, err := CheckEtcdSnapshot(path, opts.SkipHashCheck)
	if err != nil {
		return nil, fmt.Errorf("recover: %w; nothing was sent", err)
	}
	w.Progress(fmt.Sprintf("snapshot %s: %s", path, snap.Words()))
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.timeout = w.CallTimeout
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	res := &RecoverResult{Snapshot: snap}
	res.Endpoint = s.endpoint
	stopped := func(err error) error {
		if ie := interruption(parent, "recover", s.endpoint, res.State); ie != nil {
			return ie
		}
		return err
	}

	w.Progress(fmt.Sprintf("waiting for the Talos API on %s (with %s)", s.endpoint, tc))
	if res.TalosVersion, err = s.waitReady(ctx, w, false); err != nil {
		return res, stopped(err)
	}
	etcd, err := s.service(ctx, w, "etcd")
	if err != nil {
		return res, stopped(fmt.Errorf("recover: list services: %w", err))
	}
	if etcd != nil && etcd.GetState() == "Running" {
		return res, fmt.Errorf("%w (etcd service %s, %s): a recovery is for a control plane whose etcd waits for its bootstrap (flash its card again and apply its config first); nothing was sent",
			ErrAlreadyBootstrapped, etcd.GetState(), healthWord(etcd))
	}

	w.Progress(fmt.Sprintf("uploading the snapshot (%s) to %s", snap.Words(), s.endpoint))
	if err := s.uploadSnapshot(ctx, w, path, res); err != nil {
		return res, stopped(err)
	}
	w.Progress("snapshot uploaded; bootstrapping etcd from it")
	if err := s.sendBootstrap(ctx, w, recovery(opts.SkipHashCheck), &res.BootstrapResult); err != nil {
		return res, stopped(err)
	}
	w.Progress("bootstrap accepted; waiting for etcd to restore the snapshot and be healthy")
	err = s.waitEtcdHealthy(ctx, w, func(etcd *machine.ServiceInfo) error {
		return fmt.Errorf("%w: etcd could not start from the snapshot (the node says: %s)", ErrRecoverFailed, lastEvent(etcd))
	})
	if err != nil {
		return res, stopped(fmt.Errorf("recover: bootstrapped from the snapshot, but etcd did not become healthy: %w", err))
	}
	res.EtcdHealthy = true
	w.Progress(fmt.Sprintf("etcd is running and healthy, recovered at revision %d", snap.Revision))
	return res, nil
}

// ErrRecoverFailed: the node took the snapshot and the bootstrap,
// and its etcd failed to start from it. errors.Is(err, ErrRefused) (exit 8).
var ErrRecoverFailed error = refusal("etcd's recovery failed on the node")

func lastEvent(si *machine.ServiceInfo) string {
	ev := si.GetEvents().GetEvents()
	if len(ev) == 0 {
		return si.GetState()
	}
	return sanitize(ev[len(ev)-1].GetMsg())
}

// uploadSnapshot sends the file with EtcdRecover, again while the node
// answers FailedPrecondition (not ready for recovery yet).
func (s *session) uploadSnapshot(ctx context.Context, w WaitOptions, path string, res *RecoverResult) error {
	last := ""
	for {
		res.Uploads++
		err := s.sendSnapshot(ctx, path, res.Snapshot.Size)
		if err == nil {
			res.Uploaded = true
			return nil
		}
		st := status.Convert(err)
		msg := sanitize(st.Message())
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("recover: upload: gave up after %s: %w", w.Timeout, ctx.Err())
		case st.Code() == codes.Unimplemented:
			return fmt.Errorf("%w (the node says: %s); recover on a control plane", ErrNotControlPlane, msg)
		case st.Code() == codes.FailedPrecondition || st.Code() == codes.Unavailable:
			if line := "node not ready for the snapshot yet: " + msg; line != last {
				w.Progress(line)
				last = line
			}
			if err := sleep(ctx, w.Every); err != nil {
				return fmt.Errorf("recover: upload: gave up after %s: %w", w.Timeout, err)
			}
			continue
		}
		var local *os.PathError
		if errors.As(err, &local) {
			return fmt.Errorf("recover: %w", err)
		}
		return fmt.Errorf("recover: upload: %w", s.err(ctx, "etcd recover", err))
	}
}

// sendSnapshot is one EtcdRecover call: the file in 4 KiB messages, as
// machinery's client sends it (pkg/machinery/client/client.go EtcdRecover).
// Only the size that was checked is read and sent: a file written to
// since its check is not sent past it (a bounded read, whatever writes
// it), and one cut shorter is refused.
func (s *session) sendSnapshot(ctx context.Context, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() || st.Size() < size {
		return &os.PathError{Op: "upload", Path: path, Err: fmt.Errorf("changed since its check (%d bytes then)", size)}
	}
	r := io.LimitReader(f, size)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up, err := s.c.MachineClient.EtcdRecover(cctx)
	if err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := up.Send(&common.Data{Bytes: buf[:n]}); err != nil {
				if errors.Is(err, io.EOF) {
					break // the server ended the stream: its answer says why
				}
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	resp, err := up.CloseAndRecv()
	if err != nil {
		return err
	}
	for _, m := range resp.GetMessages() {
		if e := m.GetMetadata().GetError(); e != "" {
			return status.Error(codes.Unknown, e)
		}
	}
	return nil
}
