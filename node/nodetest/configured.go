package nodetest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	configpb "github.com/siderolabs/talos/pkg/machinery/api/resource/config"
	configpkg "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configdiff"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A configured node's config (Talos v1.14 sources, see rules114):
//
//   - its COSI MachineConfigs.config.talos.dev "v1alpha1" holds the config
//     byte for byte as applied (a YAML string spec with the
//     talos.dev/yaml-spec annotation); the type is sensitive: os:admin only
//     (internal/app/resources/access.go);
//   - ApplyConfiguration is os:admin only outside maintenance, one at a
//     time, needs a v1alpha1 document, refuses mode REBOOT, answers AUTO as
//     NO_REBOOT and applies NO_REBOOT and TRY at once, STAGED at the next
//     boot; a dry run answers "Dry run summary:" with the config diff
//     (v1alpha1_server.go ApplyConfiguration, generateDiff);
//   - an applied change of ExtensionServiceConfig documents restarts the
//     services concerned: one without its document waits for it, one with
//     it runs (controllers/runtime/extension_service.go handleRestart); the
//     boot stage changes only at the next boot (StartAllServices).

// machineConfig is the MachineConfig resource of a fake node: the bytes as
// applied, whatever kinds they hold (machinery v1.13's own resource would
// re-encode them and drop the 1.14 documents it does not know).
type machineConfig struct {
	md   resource.Metadata
	spec machineConfigSpec
}

type machineConfigSpec struct{ raw []byte }

// MarshalYAML is config.v1alpha1Spec's: the config as a YAML string.
func (s machineConfigSpec) MarshalYAML() (any, error) { return string(s.raw), nil }

// MarshalProto is config.v1alpha1Spec's: MachineConfigSpec.YamlMarshalled.
func (s machineConfigSpec) MarshalProto() ([]byte, error) {
	return proto.Marshal(&configpb.MachineConfigSpec{YamlMarshalled: s.raw})
}

func newMachineConfig(raw []byte) *machineConfig {
	r := &machineConfig{md: resource.NewMetadata(config.NamespaceName, config.MachineConfigType, config.ActiveID, resource.VersionUndefined),
		spec: machineConfigSpec{raw: slices.Clone(raw)}}
	r.md.Annotations().Set("talos.dev/yaml-spec", "1")
	return r
}

func (r *machineConfig) Metadata() *resource.Metadata { return &r.md }
func (r *machineConfig) Spec() any                    { return r.spec }
func (r *machineConfig) DeepCopy() resource.Resource {
	return &machineConfig{md: r.md.Copy(), spec: machineConfigSpec{raw: slices.Clone(r.spec.raw)}}
}

// ResourceDefinition marks it sensitive, as machinery's MachineConfig does.
func (r *machineConfig) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{Type: config.MachineConfigType, DefaultNamespace: config.NamespaceName, Sensitivity: meta.Sensitive}
}

// isAdmin: the peer's client certificate carries os:admin.
func isAdmin(ctx context.Context) bool { return slices.Contains(clientRoles(ctx), roleAdmin) }

// ApplyRequest is one ApplyConfiguration call a configured node received.
type ApplyRequest = Request

// ConfigApplies lists the ApplyConfiguration calls the configured node
// received (dry runs included), byte for byte.
func (n *Node) ConfigApplies() []Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Request, len(n.applies))
	for i, r := range n.applies {
		r.Config = slices.Clone(r.Config)
		out[i] = r
	}
	return out
}

// Config is the config the node runs now (nil when it was started without one).
func (n *Node) Config() []byte { n.mu.Lock(); defer n.mu.Unlock(); return slices.Clone(n.config) }

// MachineConfigReads counts COSI reads of the MachineConfig resource.
func (n *Node) MachineConfigReads() int { n.mu.Lock(); defer n.mu.Unlock(); return n.configReads }

// ApplyConfiguration is v1alpha1_server.go's for a configured node (see
// the comment at the top of this file).
func (n *Node) ApplyConfiguration(ctx context.Context, in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	req := Request{Config: slices.Clone(in.GetData()), Mode: in.GetMode(), DryRun: in.GetDryRun()}
	if d := in.GetTryModeTimeout(); d != nil {
		req.TryTimeout = d.AsDuration()
	}
	n.mu.Lock()
	n.applies = append(n.applies, req)
	n.mu.Unlock()
	n.opts.Logf("ApplyConfiguration (configured): %d bytes, mode %s, dry run %v", len(req.Config), req.ModeName(), req.DryRun)
	if !n.applying.TryLock() {
		return nil, status.Error(codes.FailedPrecondition, "another apply configuration is already in progress")
	}
	defer n.applying.Unlock()

	provider, warnings, err := n.loadConfig(in.GetData())
	if err != nil {
		return nil, err
	}
	mode := in.GetMode()
	switch mode {
	case machine.ApplyConfigurationRequest_REBOOT:
		return nil, status.Error(codes.Unimplemented, "the REBOOT mode is not supported, please use AUTO or NO_REBOOT modes instead")
	case machine.ApplyConfigurationRequest_AUTO:
		mode = machine.ApplyConfigurationRequest_NO_REBOOT
	}
	var details string
	switch mode {
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_NO_REBOOT:
		details = "Applied configuration without a reboot"
	case machine.ApplyConfigurationRequest_STAGED:
		details = "Staged configuration to be applied after the next reboot"
	default:
		return nil, status.Errorf(codes.InvalidArgument, "incorrect mode '%s' specified for the apply config call", in.GetMode().String())
	}
	if in.GetDryRun() {
		diff := "No changes."
		if (&Server{opts: Options{TalosVersion: n.RunningVersion()}}).is114() {
			// Every document, as a 1.14 node encodes it (diff114.go).
			diff = diff114(n.Config(), in.GetData())
		} else if old, _, err := n.loadConfig(n.Config()); err == nil && provider != nil {
			if d, err := configdiff.DiffConfigs(old, provider); err == nil && d != "" {
				diff = d
			}
		}
		return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{
			Mode: mode, ModeDetails: fmt.Sprintf("Dry run summary:\n%s (skipped in dry-run).\nConfig diff:\n\n%s", details, diff),
		}}}, nil
	}
	switch mode {
	case machine.ApplyConfigurationRequest_STAGED:
		n.mu.Lock()
		n.stagedConfig = slices.Clone(in.GetData())
		n.mu.Unlock()
	default:
		n.setConfig(in.GetData())
		if mode == machine.ApplyConfigurationRequest_TRY {
			timeout := time.Minute
			if in.GetTryModeTimeout() != nil {
				timeout = in.GetTryModeTimeout().AsDuration()
			}
			details += fmt.Sprintf("\nThe config is applied in 'try' mode and will be automatically reverted back in %s", timeout)
		}
	}
	return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{Mode: mode, Warnings: warnings, ModeDetails: details}}}, nil
}

// loadConfig decides on a config as the node's Talos does: the 1.14 rules
// (talos114.go) or machinery v1.13; InvalidArgument with the node's words.
// The provider holds what machinery v1.13 decodes (for the dry run's diff).
func (n *Node) loadConfig(data []byte) (configpkg.Provider, []string, error) {
	s := &Server{opts: Options{TalosVersion: n.version}}
	if s.is114() {
		res, w, loadErr, validateErr := validate114(data, false)
		switch {
		case loadErr != "":
			return nil, nil, status.Error(codes.InvalidArgument, loadErr)
		case validateErr != "":
			return nil, nil, status.Error(codes.InvalidArgument, validateErr)
		case len(res.ByKind("v1alpha1")) == 0:
			return nil, nil, errNoV1alpha1
		}
		return res.Provider, w, nil
	}
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if cfg.RawV1Alpha1() == nil {
		return nil, nil, errNoV1alpha1
	}
	w, err := cfg.Validate(metal{})
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return cfg, w, nil
}

var errNoV1alpha1 = status.Error(codes.InvalidArgument, "the applied machine configuration doesn't contain v1alpha1 config, did you mean to patch the machine config instead?")

// setConfig makes data the running config: the MachineConfig resource
// and the extension services it configures (handleRestart).
func (n *Node) setConfig(data []byte) {
	n.mu.Lock()
	n.config = slices.Clone(data)
	n.configureExtensionsLocked()
	n.applyHostnameLocked()
	st := n.st
	n.mu.Unlock()
	if st != nil {
		if err := putMachineConfig(context.Background(), st, data); err != nil {
			n.opts.Logf("machine config resource: %v", err)
		}
		if err := n.syncHostname(context.Background(), st); err != nil {
			n.opts.Logf("hostname: %v", err)
		}
	}
	// An extension service waiting for its document starts now; the boot
	// sequence may complete (sequence.go).
	n.sync()
}

// configureExtensionsLocked derives the extension services' state from the
// running config (a node started without one keeps its options').
func (n *Node) configureExtensionsLocked() {
	if n.config == nil {
		return
	}
	names := extensionConfigNames(n.config)
	n.waitingExt = waitingExtensions(n.schematic, names, false)
	n.runningExt = waitingExtensions(n.schematic, names, true)
}

// putMachineConfig creates or replaces the MachineConfig resource.
func putMachineConfig(ctx context.Context, st state.State, data []byte) error {
	r := newMachineConfig(data)
	cur, err := st.Get(ctx, r.Metadata())
	switch {
	case state.IsNotFoundError(err):
		return st.Create(ctx, r)
	case err != nil:
		return err
	}
	r.md.SetVersion(cur.Metadata().Version())
	return st.Update(ctx, r)
}
