package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"go.yaml.in/yaml/v4"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// Running is what a configured node runs, read over mTLS: its config (it
// holds the cluster's PKI: never print it), its Talos version and the
// schematic it booted.
type Running struct {
	Endpoint string
	Version  string
	Booted   *Booted // nil when the node reports no extension statuses
	// Hostname and Domainname are its HostnameStatus ("" when unreadable).
	Hostname, Domainname string
	Config               []byte
}

// ReadRunning reads a configured node's machine config as talosctl patch
// and edit do (cmd/talosctl/pkg/talos/helpers/resources.go
// MachineConfigUpdater: a COSI Get of MachineConfigs.config.talos.dev
// "v1alpha1" with the protobuf unmarshal skipped, then patch.go
// extractMachineConfigBody), with its version and what it booted. The
// config is sensitive: the node answers os:admin only.
func ReadRunning(ctx context.Context, endpoint string, tc *Talosconfig, opts WaitOptions) (*Running, error) {
	opts = opts.withDefaults()
	if tc == nil {
		return nil, fmt.Errorf("read config: %w: none given", ErrTalosconfig)
	}
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.timeout = opts.CallTimeout
	cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()
	out := &Running{Endpoint: s.endpoint}
	v, err := s.c.Version(cctx)
	if err != nil {
		return out, fmt.Errorf("read config: %w", s.err(cctx, "version request", err))
	}
	if len(v.GetMessages()) > 0 {
		out.Version = printable(v.GetMessages()[0].GetVersion().GetTag(), maxName)
	}
	if out.Booted, err = readBooted(cctx, s.c); err != nil {
		return out, fmt.Errorf("read config: %w", s.err(cctx, "extension status request", err))
	}
	if h, err := safe.StateGet[*network.HostnameStatus](cctx, s.c.COSI, resource.NewMetadata(network.NamespaceName, network.HostnameStatusType, network.HostnameID, resource.VersionUndefined)); err == nil {
		out.Hostname, out.Domainname = h.TypedSpec().Hostname, h.TypedSpec().Domainname
	}
	if out.Config, err = readMachineConfig(cctx, s); err != nil {
		return out, err
	}
	return out, nil
}

// readMachineConfig reads the node's running config (os:admin), bounded.
func readMachineConfig(ctx context.Context, s *session) ([]byte, error) {
	r, err := s.c.COSI.Get(ctx, resource.NewMetadata(config.NamespaceName, config.MachineConfigType, config.ActiveID, resource.VersionUndefined),
		state.WithGetUnmarshalOptions(state.WithSkipProtobufUnmarshal()))
	if err != nil {
		return nil, fmt.Errorf("read the machine config of %s: %w", s.endpoint, s.err(ctx, "machine config request", err))
	}
	data, err := machineConfigBody(r)
	if err != nil {
		return nil, fmt.Errorf("read the machine config of %s: %w", s.endpoint, err)
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("read the machine config of %s: %s, more than %s", s.endpoint, humanbytes.Exact(int64(len(data))), humanbytes.Exact(MaxConfigSize))
	}
	return data, nil
}

// machineConfigBody is talosctl's extractMachineConfigBody
// (cmd/talosctl/cmd/talos/patch.go): the spec is the config as a YAML
// string, or (Talos before the talos.dev/yaml-spec annotation) the
// resource's raw YAML spec. Its errors never quote the config.
func machineConfigBody(r resource.Resource) ([]byte, error) {
	pb, ok := r.(*protobuf.Resource)
	if !ok {
		return nil, fmt.Errorf("unexpected resource type %T", r)
	}
	p, err := pb.Marshal()
	if err != nil {
		return nil, errors.New("the machine config resource cannot be read")
	}
	raw := p.GetSpec().GetYamlSpec()
	if r.Metadata().Annotations().Empty() {
		return []byte(raw), nil
	}
	var body string
	if err := yaml.Unmarshal([]byte(raw), &body); err != nil {
		return nil, errors.New("the machine config resource's spec is not a YAML string")
	}
	return []byte(body), nil
}
