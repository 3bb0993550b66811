package nodetest

import (
	"context"
	"fmt"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/node/internal/talos114"
)

// The COSI side of a fake node as Talos v1.14.0-rc.1 sets it up
// (internal/app/machined/pkg/runtime/v1alpha2/v1alpha2_state.go): the
// default COSI registries (the "meta" namespace, ResourceDefinitions and
// Namespaces themselves), Talos' namespaces, and a ResourceDefinition for
// each resource type (meta.NewResourceDefinition: ID = the type in lower
// case, aliases filled in). talosctl resolves `get KIND` through them
// (pkg/machinery/client/resources.go ResolveResourceKind: "resource %q is
// not registered" otherwise), and the access policy reads them
// (internal/app/resources/access.go AccessPolicy): writes refused, a type
// without a definition PermissionDenied "resource type %q is not
// supported", a Sensitive one for os:admin only ("not authorized"), a
// namespace without its Namespace resource "namespace %q is not supported".
//
// Registered: every type the fake serves, and the secrets it never serves
// but a client may ask for (their definitions say Sensitive).

// talosNamespaces are v1alpha2_state.go's namespaces with their descriptions.
var talosNamespaces = []struct {
	name        resource.Namespace
	description string
}{
	{v1alpha1.NamespaceName, "Talos v1alpha1 subsystems glue resources."},
	{"cluster", "Cluster configuration and discovery resources."},
	{"cluster-raw", "Cluster unmerged raw resources."},
	{config.NamespaceName, "Talos node configuration."},
	{"etcd", "etcd resources."},
	{"files", "Files and file-like resources."},
	{hardware.NamespaceName, "Hardware resources."},
	{k8s.NamespaceName, "Kubernetes all node types resources."},
	{k8s.ControlPlaneNamespaceName, "Kubernetes control plane resources."},
	{"kubespan", "KubeSpan resources."},
	{network.NamespaceName, "Networking resources."},
	{network.ConfigNamespaceName, "Networking configuration resources."},
	{"cri", "CRI Seccomp resources."},
	{"containers", "Talos-managed container resources."},
	{secrets.NamespaceName, "Resources with secret material."},
	{"security", "Security resources."},
	{"perf", "Stats resources."},
	{"storage", "Storage resources."},
}

// servedDefinitions are the resources whose definitions a fake registers.
func servedDefinitions() []meta.ResourceWithRD {
	return []meta.ResourceWithRD{
		&runtime.MachineStatus{},
		&runtime.Version{},
		&runtime.ExtensionStatus{},
		talos114.NewImageFactorySchematic(),
		&network.HostnameStatus{},
		&network.LinkStatus{},
		&hardware.SystemInformation{},
		&config.MachineConfig{},
		&v1alpha1.Service{},
		&k8s.Nodename{},
		&secrets.OSRoot{},
		&secrets.KubernetesRoot{},
		&secrets.EtcdRoot{},
	}
}

// registerDefinitions fills st's meta namespace as machined does at start.
func registerDefinitions(ctx context.Context, st state.State) error {
	ns, rd := registry.NewNamespaceRegistry(st), registry.NewResourceRegistry(st)
	if err := ns.RegisterDefault(ctx); err != nil {
		return fmt.Errorf("namespace registry: %w", err)
	}
	if err := rd.RegisterDefault(ctx); err != nil {
		return fmt.Errorf("resource registry: %w", err)
	}
	for _, n := range talosNamespaces {
		if err := ns.Register(ctx, n.name, n.description); err != nil {
			return fmt.Errorf("namespace %s: %w", n.name, err)
		}
	}
	for _, r := range servedDefinitions() {
		if err := rd.Register(ctx, r); err != nil {
			return fmt.Errorf("resource definition %s: %w", r.ResourceDefinition().Type, err)
		}
	}
	return nil
}

// errNotAuthorized is authz.ErrNotAuthorized (pkg/grpc/middleware/authz).
var errNotAuthorized = status.Error(codes.PermissionDenied, "not authorized")

// accessPolicy114 is access.go AccessPolicy over st's definitions; admin
// says whether the caller holds os:admin (a maintenance client never does).
func accessPolicy114(st state.State, admin func(context.Context) bool) state.FilteringRule {
	return func(ctx context.Context, access state.Access) error {
		if !access.Verb.Readonly() {
			return status.Error(codes.PermissionDenied, "write access is not allowed")
		}
		rd, err := safe.StateGet[*meta.ResourceDefinition](ctx, st, resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(access.ResourceType), resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("resource type %q is not supported", access.ResourceType))
			}
			return err
		}
		switch s := rd.TypedSpec().Sensitivity; s {
		case meta.Sensitive:
			if !admin(ctx) {
				return errNotAuthorized
			}
		case meta.NonSensitive:
		default:
			return fmt.Errorf("unexpected sensitivity %q", s)
		}
		if _, err := safe.StateGet[*meta.Namespace](ctx, st, resource.NewMetadata(meta.NamespaceName, meta.NamespaceType, access.ResourceNamespace, resource.VersionUndefined)); err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("namespace %q is not supported", access.ResourceNamespace))
			}
			return err
		}
		return nil
	}
}

// maintenanceAdmin: a maintenance client holds no os:admin role.
func maintenanceAdmin(context.Context) bool { return false }
