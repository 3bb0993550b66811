package node

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// MaxKubeconfigSize bounds what FetchKubeconfig reads from a node: the
// compressed stream and the kubeconfig in it (a few KiB in practice).
const MaxKubeconfigSize = 1 << 20

// ErrNoKubeconfig: the node's answer holds no kubeconfig file.
var ErrNoKubeconfig = errors.New("the node's answer holds no kubeconfig")

// FetchKubeconfig asks a control plane for the cluster's admin kubeconfig,
// as `talosctl kubeconfig` does: MachineService.Kubeconfig (os:admin)
// streams a .tar.gz holding one file, "kubeconfig"
// (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go; the
// client side is cmd/talosctl/pkg/talos/helpers ExtractFileFromTarGz). The
// node generates it from its config, a fresh client certificate each call.
// The bytes hold a client key: the caller must never print or log them;
// errors never quote them.
func FetchKubeconfig(ctx context.Context, endpoint string, tc *Talosconfig) ([]byte, error) {
	if tc == nil {
		return nil, fmt.Errorf("kubeconfig: %w: none given", ErrTalosconfig)
	}
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.timeout = DefaultCallTimeout
	cctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	rc, err := s.c.KubeconfigRaw(cctx)
	if err != nil {
		return nil, s.err(cctx, "kubeconfig", err)
	}
	defer rc.Close() //nolint:errcheck
	data, err := kubeconfigFromTarGz(io.LimitReader(rc, MaxKubeconfigSize+1))
	if err != nil {
		// A refused call (a worker, a reader certificate) reaches the
		// reader as the node's gRPC status: explain it like every call.
		var se interface{ GRPCStatus() *status.Status }
		if errors.As(err, &se) {
			return nil, s.err(cctx, "kubeconfig", se.GRPCStatus().Err())
		}
		return nil, err
	}
	return data, nil
}

// kubeconfigFromTarGz returns the "kubeconfig" file of a .tar.gz stream
// (bounded). Talos does not close its tar writer: the archive may end
// without the end-of-archive blocks, which is not an error here either.
func kubeconfigFromTarGz(r io.Reader) ([]byte, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: the node's answer is not gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, ErrNoKubeconfig
		}
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: the node's archive: %w", err)
		}
		if strings.TrimPrefix(path.Clean("/"+hdr.Name), "/") != "kubeconfig" {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("kubeconfig: %w (the archive's kubeconfig is not a file)", ErrNoKubeconfig)
		}
		data, err := io.ReadAll(io.LimitReader(tr, MaxKubeconfigSize+1))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: reading it from the node's archive: %w", err)
		}
		if len(data) > MaxKubeconfigSize {
			return nil, fmt.Errorf("kubeconfig: larger than %s", humanbytes.Exact(MaxKubeconfigSize))
		}
		return data, nil
	}
}
