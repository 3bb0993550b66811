package nodetest

import (
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/cel"
	"github.com/siderolabs/talos/pkg/machinery/cel/celenv"

	"github.com/talosflash/talosflash/node/internal/talos114"
)

// A fake Talos 1.14 node decides on a config in three steps:
//
//  1. talos114.Load: machinery v1.13 decodes what it knows; documents of the
//     45 kinds only v1.14 registers (talos114.Kinds) and documents whose only
//     unknown keys are fields v1.14 added (talos114.NewerFields) are kept
//     byte for byte but v1.13 CANNOT DECIDE on them: it never sees them.
//     A kind v1.14 does not register either is the loader's own
//     `"Kind" "v1alpha1": not registered`.
//  2. talos114.ValidateV113: v1.13's checks over the rest, with the two
//     v1alpha1 rules v1.14 relaxed (see rules114 entries with adjust).
//  3. rules114 below: the v1.14 rules over the documents v1.13 never saw,
//     in the node's own words.
//
// Every behaviour the fake models is in rules114, with its upstream file
// (siderolabs/talos v1.14.0-rc.1): the v1.14 config rules, and (served)
// what the node reports outside a config decision. Rules marked rc1 are
// off unless Options.RC1Rules: Talos v1.14.0-rc.1 refuses such configs and
// the sources (release-1.14 = the rc.1 commit, and main) keep both rules;
// nothing there says a later 1.14 accepts them. They are optional here so
// that tests can model both answers: the node's own dry run decides for the
// user's version.
type rule114 struct {
	name   string
	source string
	rc1    bool // only with Options.RC1Rules
	// adjust: applied inside talos114.ValidateV113 (a v1.13 rule that v1.14
	// dropped), listed here so the table is complete.
	adjust bool
	// served: what the node reports (server.go buildState), not a config
	// rule; listed here so the table is complete.
	served bool
	check  func(r *talos114.Result, rc1 bool) (warnings, errs []string)
}

var controlPlaneOnlyKinds = talos114.ControlPlaneOnlyKinds

// The message texts below are the node's, verbatim.
const (
	msgUICConflict      = "UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)"
	msgUICSelector      = "UnattendedInstallConfig: provisioning.volumeSelector.match is required"
	msgUICNoImage       = "installer.image is not set, if Talos is not booted from asset built by Image Factory, installation will fail"
	msgControlPlaneOnly = "the following document kinds are only allowed on control plane machines: "
)

var rules114 = []rule114{
	{
		name: "hostname split: an FQDN is HostnameStatus.Hostname (up to the first dot) + Domainname (the rest)", served: true,
		source: "pkg/machinery/resources/network/hostname_spec.go (ParseFQDN), internal/app/machined/pkg/controllers/network/hostname_spec.go",
	},
	{
		name: "extension status IDs: the layer image name without .sqsh, i.e. the extension's index (\"0\", \"1\", ...), the factory's virtual schematic extension last; the name is in spec metadata", served: true,
		source: "pkg/imager/imager.go (extensions unpacked by index), internal/app/machined/pkg/controllers/runtime/extension_status.go",
	},
	{
		name: "ImageFactorySchematics (ID image-factory-schematic) from the schematic extension's version and author (Talos >= 1.14)", served: true,
		source: "internal/app/machined/pkg/controllers/runtime/image_factory_schematic.go",
	},
	{
		name: "MachineStatus: stage from the sequencer's events (booting until the boot sequence stops), ready with unmet conditions time, network, services (required services and running unhealthy ones only), staticPods, nodeReady", served: true,
		source: "internal/app/machined/pkg/controllers/runtime/machine_status.go, pkg/machinery/resources/runtime/machine_status.go",
	},
	{
		name: "an extension service with depends configuration: true is State Waiting, health unknown, last event \"Waiting for extension service config\", and never a MachineStatus unmet condition (no Service resource until it runs)", served: true,
		source: "internal/app/machined/pkg/system/services/extension.go (Condition), pkg/machinery/resources/runtime/condition.go (ExtensionServiceConfigStatusCondition), internal/app/machined/pkg/system/service_runner.go (waitFor), internal/app/machined/pkg/controllers/v1alpha1/service.go",
	},
	{
		name: "a boot whose services never all come up reboots at constants.BootTimeout (70 min), with a new boot ID", served: true,
		source: "internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer_tasks.go (StartAllServices), pkg/machinery/constants/constants.go (BootTimeout)",
	},
	{
		name: "EtcdMemberList: control planes only (Unimplemented \"member list is only available on control plane nodes\"); members id, hostname, peer and client URLs, learner", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (EtcdMemberList), internal/app/internal/machinehelper/machinehelper.go",
	},
	{
		name: "Read (os:admin) of /proc/sys/kernel/random/boot_id and /proc/uptime; ServiceList, EtcdMemberList and COSI reads for os:reader", served: true,
		source: "internal/app/machined/pkg/system/services/machined.go (rules), internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (Read)",
	},
	{
		name: "a configured control plane stays booting until its bootstrap: StartAllServices waits for etcd, whose PreFunc waits to join (etcd Preparing, last event \"Running pre state\"); MachineStatus unmet services \"etcd not running\"", served: true,
		source: "internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer_tasks.go (StartAllServices), internal/app/machined/pkg/system/services/etcd.go (PreFunc, buildInitialCluster), internal/app/machined/pkg/system/service_runner.go, controllers/runtime/machine_status.go (servicesCheck)",
	},
	{
		name: "MachineStatus nodeReady: node \"<nodename>\" status is not available yet (not registered), node \"<nodename>\" is not ready (Kubernetes Ready false); the nodename is the short hostname, lower case", served: true,
		source: "internal/app/machined/pkg/controllers/runtime/machine_status.go (nodeReadyCheck), internal/app/machined/pkg/controllers/k8s/nodename.go",
	},
	{
		name: "services whose extension needs its ExtensionServiceConfig (newt, cloudflared, tailscale) wait when the applied config lacks the document named after the service", served: true,
		source: "siderolabs/extensions network/newt/newt.yaml, network/cloudflared/cloudflared.yaml, network/tailscale/tailscale.yaml (depends: configuration: true), internal/app/machined/pkg/system/services/extension.go",
	},
	{
		name: "Kubeconfig (os:admin, control planes only: Unimplemented \"kubeconfig is only available on control plane nodes\"): one message of a .tar.gz holding kubeconfig (0600, tar writer not closed), generated from the config: cluster <clusterName> at the cluster endpoint with the accepted CAs, user and context admin@<clusterName>, namespace default, client certificate CN admin O system:masters", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (Kubeconfig), internal/app/internal/machinehelper/machinehelper.go (CheckControlplane), pkg/kubeconfig/generate.go (GenerateAdmin, Generate), internal/app/machined/pkg/system/services/machined.go (rules)",
	},
	{
		name: "after the bootstrap the control plane serves the Kubernetes API on its address at the endpoint's port with the config's Kubernetes CA (KubeAPIServerCAConfig issuingCA / cluster.ca); every node's kubelet registers in it (node/nodetest/kubetest models the API)", served: true,
		source: "internal/app/machined/pkg/controllers/k8s/control_plane_static_pod.go, pkg/machinery/config/types/k8s/apiserver_ca.go",
	},
	{
		name: "Flannel is deployed when the control plane's config has a KubeFlannelCNIConfig document, or (without one) a v1alpha1 cluster.network section whose cni is flannel or unset", served: true,
		source: "pkg/machinery/config/container/container.go (K8sFlannelCNIConfig), pkg/machinery/config/types/v1alpha1/v1alpha1_k8s_bridge.go, v1alpha1_clusterconfig.go (CNI), internal/app/machined/pkg/controllers/k8s/control_plane.go",
	},
	{
		name: "a configured node serves its config as COSI MachineConfigs.config.talos.dev \"v1alpha1\" (the applied bytes as a YAML string spec, annotation talos.dev/yaml-spec), a sensitive type: os:admin only", served: true,
		source: "pkg/machinery/resources/config/machine_config.go, internal/app/resources/access.go (AccessPolicy), cmd/talosctl/pkg/talos/helpers/resources.go (MachineConfigUpdater), cmd/talosctl/cmd/talos/patch.go (extractMachineConfigBody)",
	},
	{
		name: "ApplyConfiguration on a configured node: os:admin only, one at a time, a v1alpha1 document required, REBOOT refused (Unimplemented), AUTO answered NO_REBOOT and applied at once, STAGED at the next boot; a dry run answers \"Dry run summary:\" with the config diff", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (ApplyConfiguration, generateDiff)",
	},
	{
		name: "an applied change of ExtensionServiceConfig documents restarts the extension services concerned: without its document a service waits for it, with it it runs; a service waiting for its config starts as soon as the document arrives, so StartAllServices completes and the stage becomes running in place, without a reboot (sequence.go)", served: true,
		source: "internal/app/machined/pkg/controllers/runtime/extension_service.go (handleRestart), internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer_tasks.go (StartAllServices)",
	},
	{
		name: "the boot sequence (9 phases on metal) publishes Sequence, Phase and Task events and logs \"[talos] ...\" lines; startAllServices logs \"waiting for N services\", then every 15 s the services not up yet; its end (or its BootTimeout failure: a FATAL NOOP SequenceEvent, then a reboot) sets the stage", served: true,
		source: "internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer.go (Boot), v1alpha1_controller.go (Run, run, runPhase, runTask), v1alpha1_sequencer_tasks.go (StartAllServices), pkg/conditions/all.go, internal/app/machined/main.go (handle), controllers/runtime/machine_status.go",
	},
	{
		name: "each service runner's state changes are events (kept, last 64), \"[talos] service[<id>](<State>): <message>\" log lines and ServiceStateEvents; a Service resource exists only while a service runs", served: true,
		source: "internal/app/machined/pkg/system/service_runner.go (UpdateState, healthUpdate, waitFor), internal/app/machined/pkg/controllers/v1alpha1/service.go",
	},
	{
		name: "Events: a hello event, then the boot's events by tail_events, tail_id or tail_seconds and with_actor_id, then the new ones; MachineStatusEvent at every MachineStatus change; Reboot answers a UUID actor ID carried by the reboot sequence's events (stopAllServices among them)", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (Events, Reboot), internal/app/machined/pkg/runtime/events.go, controllers/runtime/machine_status_publisher.go, v1alpha1_sequencer.go (Reboot), cmd/talosctl/pkg/talos/action/node.go",
	},
	{
		name: "Logs of Talos services (machined: the sequences' and services' lines; a service not started has an empty log) with tail_lines and follow; Dmesg in talosctl's format, machined's lines as user warnings", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (Logs, Dmesg), v1alpha1_controller.go (setupLogging), siderolabs/go-kmsg kmsg.go (SetupLogger)",
	},
	{
		name: "COSI ResourceDefinitions and Namespaces for every type served (talosctl get resolves kinds and aliases through them); reads filtered by them: writes refused, unknown types and namespaces \"not supported\", Sensitive types os:admin only", served: true,
		source: "internal/app/machined/pkg/runtime/v1alpha2/v1alpha2_state.go, internal/app/resources/access.go (AccessPolicy), pkg/machinery/client/resources.go (ResolveResourceKind)",
	},
	{
		name: "roles per method: Reboot and ImageService.Pull for os:admin and os:operator, reads for os:reader too, LifecycleService and the rest os:admin (FallbackRoles)", served: true,
		source: "internal/app/machined/pkg/system/services/machined.go (rules)",
	},
	{
		name: "Version: tag, SHA, Go version, OS, architecture, platform metal, features (RBAC) on a configured node", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (Version), pkg/machinery/version/version.go (NewVersion)",
	},
	{
		name: "LifecycleService.Upgrade of an installer not pulled into the containerd instance and namespace it names: Internal \"upgrade failed: installer image ... not found in containerd store\", nothing streamed; one install or upgrade at a time; Pull answers the reference pinned to its digest", served: true,
		source: "internal/app/lifecycle/lifecycle.go (Upgrade), internal/app/lifecycle/container.go (runInstallerContainer), internal/app/images/images.go (Pull), internal/app/internal/ctrhelper/ctrhelper.go",
	},
	{
		name: "a dry run diffs every document, the running config's against the new one's, each encoded as the node's container encodes it (v1alpha1 first, comments and nulls dropped, map keys sorted)", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (generateDiff), pkg/machinery/config/configdiff/configdiff.go, pkg/machinery/config/container/container.go (encodeToBuf), pkg/machinery/config/encoder/encoder.go",
	},
	{
		name: "hostname layers: the card's (platform) and auto stable's (default) lose to a static config hostname (HostnameConfig hostname, else v1alpha1 machine.network.hostname); Nodenames: the short hostname, the FQDN with registerWithFQDN, made a valid node name", served: true,
		source: "pkg/machinery/resources/network/configlayer.go, internal/app/machined/pkg/controllers/network/hostname_config.go, pkg/machinery/config/container/container.go (NetworkHostnameConfig, K8sNodeConfig), internal/app/machined/pkg/controllers/k8s/nodename.go, controllers/k8s/internal/nodename/nodename.go",
	},
	{
		name: "LifecycleService (Install, Upgrade) from v1.13.0-alpha.3; MachineService.Upgrade still served (deprecated)", served: true,
		source: "cmd/talosctl/cmd/talos/upgrade.go (talosUpgradeAPIVersionRange \">1.13.0-alpha.2 <2.0.0\"), api/machine/machine.proto",
	},
	{
		name: "an upgrade's installer runs from the pulled image and streams its exit code (SetUpgradeExitCode injects a failure); the node boots the staged installer's version and schematic at the reboot, on the node's Clock", served: true,
		source: "internal/app/lifecycle/lifecycle.go (Upgrade), cmd/talosctl/cmd/talos/upgrade.go (upgradeInternal, rebootInternal)",
	},
	{
		name: "EtcdSnapshot (os:admin, os:operator, os:etcd:backup; control planes only: Unimplemented \"etcd snapshot is only available on control plane nodes\"): etcd's backend in 1 KiB messages, a bbolt database with etcd's buckets (key: revision -> mvccpb.KeyValue) as a read transaction writes it, then its SHA-256 (size mod 512 == 32); without a running etcd the etcd client's error (etcd.go)", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (EtcdSnapshot), pkg/chunker/stream/stream.go, internal/app/machined/pkg/system/services/machined.go (rules); etcd-io/etcd server/etcdserver/api/v3rpc/maintenance.go (Snapshot), server/storage/schema/bucket.go, server/storage/mvcc/revision.go, api/mvccpb/kv.proto",
	},
	{
		name: "EtcdRecover (os:admin): FailedPrecondition \"etcd service is not ready for recovery yet\" before /var is mounted, control planes only, the upload kept as /var/lib/etcd.snapshot; Bootstrap{RecoverEtcd}: etcd's pre-start step checks it as etcdutl does (status, then the SHA-256 trailer unless RecoverSkipHashCheck) and restores its keys; a failure there fails the etcd service, not the Bootstrap answer (etcd.go)", served: true,
		source: "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (EtcdRecover, Bootstrap), internal/app/machined/pkg/system/services/etcd.go (BootstrapEtcd, recoverFromSnapshot), cmd/talosctl/cmd/talos/bootstrap.go; etcd-io/etcd etcdutl/snapshot/v3_snapshot.go (Status, copyAndVerifyDB)",
	},
	{
		name: "an upgrade that does not boot is reverted: the installer keeps the previous installation as the fallback (META tag Upgrade); a boot of the new one that fails (FailUpgradedBoot, or BootTimeout) reverts the bootloader and reboots into the previous version and schematic; a boot running and ready drops the fallback (revert.go)", served: true,
		source: "cmd/installer/pkg/install/install.go (ModeUpgrade: META Upgrade), internal/app/machined/main.go (handle), internal/app/machined/revert.go, internal/app/machined/pkg/runtime/v1alpha1/bootloader/grub/revert.go, internal/app/machined/pkg/controllers/runtime/drop_upgrade_fallback.go",
	},
	{
		name: ".machine.install is optional (required by v1.13 in metal mode)", adjust: true,
		source: "pkg/machinery/config/types/v1alpha1/v1alpha1_validation.go",
	},
	{
		name: ".cluster.controlPlane.endpoint is optional (KubeClusterConfig has the endpoint)", adjust: true,
		source: "pkg/machinery/config/types/v1alpha1/v1alpha1_validation.go",
	},
	{
		name:   "UnattendedInstallConfig and .machine.install are incompatible",
		source: "pkg/machinery/config/types/runtime/unattended_install.go (V1Alpha1ConflictValidate)",
		check: func(r *talos114.Result, _ bool) (w, e []string) {
			if len(r.ByKind("UnattendedInstallConfig")) > 0 && r.HasMachineInstall() {
				e = append(e, msgUICConflict)
			}
			return w, e
		},
	},
	{
		name:   "UnattendedInstallConfig without installer.image: a warning",
		source: "pkg/machinery/config/types/runtime/unattended_install.go (Validate)",
		check: func(r *talos114.Result, _ bool) (w, e []string) {
			for _, d := range r.ByKind("UnattendedInstallConfig") {
				if talos114.Scalar(d.Root, "installer", "image") == "" {
					w = append(w, msgUICNoImage)
				}
			}
			return w, e
		},
	},
	{
		name:   "UnattendedInstallConfig provisioning.diskSelector.match must parse as a disk CEL expression",
		source: "pkg/machinery/config/types/runtime/unattended_install.go (ProvisioningSpec.Validate)",
		check: func(r *talos114.Result, _ bool) (w, e []string) {
			for _, d := range r.ByKind("UnattendedInstallConfig") {
				if m := talos114.Scalar(d.Root, "provisioning", "diskSelector", "match"); m != "" {
					if _, err := cel.ParseBooleanExpression(m, celenv.DiskLocator()); err != nil {
						e = append(e, "UnattendedInstallConfig: provisioning.volumeSelector.match: "+err.Error())
					}
				}
			}
			return w, e
		},
	},
	{
		name: "UnattendedInstallConfig needs provisioning.diskSelector.match", rc1: true,
		source: "pkg/machinery/config/types/runtime/unattended_install.go (ProvisioningSpec.Validate)",
		check: func(r *talos114.Result, _ bool) (w, e []string) {
			for _, d := range r.ByKind("UnattendedInstallConfig") {
				if talos114.Scalar(d.Root, "provisioning", "diskSelector", "match") == "" {
					e = append(e, msgUICSelector)
				}
			}
			return w, e
		},
	},
	{
		name:   "Kube* control plane documents only on control plane machines (KubeProxyConfig: rc.1 only)",
		source: "pkg/machinery/config/container/validate.go (validateContainer), config/types/k8s/*.go",
		check: func(r *talos114.Result, rc1 bool) (w, e []string) {
			if t := r.MachineType(); t == "controlplane" || t == "init" {
				return nil, nil
			}
			var kinds []string
			for _, d := range r.Docs {
				if slices.Contains(controlPlaneOnlyKinds, d.Kind) && (rc1 || d.Kind != "KubeProxyConfig") {
					kinds = append(kinds, d.Kind)
				}
			}
			slices.Sort(kinds)
			kinds = slices.Compact(kinds)
			if len(kinds) > 0 {
				e = append(e, msgControlPlaneOnly+"["+strings.Join(kinds, " ")+"]")
			}
			return w, e
		},
	},
	{
		name:   "DiscoveryServiceConfig needs a cluster identity",
		source: "pkg/machinery/config/container/validate.go (validateContainer)",
		check: func(r *talos114.Result, _ bool) (w, e []string) {
			if len(r.ByKind("DiscoveryServiceConfig")) == 0 {
				return nil, nil
			}
			var id, secret string
			for _, d := range r.ByKind("DiscoveryIdentityConfig") {
				id, secret = talos114.Scalar(d.Root, "clusterID"), talos114.Scalar(d.Root, "clusterSecret")
			}
			for _, d := range r.ByKind("v1alpha1") { // the deprecated .cluster.id/.cluster.secret
				if id == "" {
					id = talos114.Scalar(d.Root, "cluster", "id")
				}
				if secret == "" {
					secret = talos114.Scalar(d.Root, "cluster", "secret")
				}
			}
			if id == "" {
				e = append(e, "cluster ID (.cluster.id or DiscoveryIdentityConfig) should be set when cluster discovery (DiscoveryServiceConfig) is enabled")
			}
			if secret == "" {
				e = append(e, "cluster secret (.cluster.secret or DiscoveryIdentityConfig) should be set when cluster discovery (DiscoveryServiceConfig) is enabled")
			}
			return w, e
		},
	},
	{
		name:   "a control plane with KubeAPIServerCAConfig needs etcd encryption",
		source: "pkg/machinery/config/container/validate.go (validateContainer)",
		check: func(r *talos114.Result, _ bool) (w, e []string) {
			if t := r.MachineType(); t != "controlplane" && t != "init" || len(r.ByKind("KubeAPIServerCAConfig")) == 0 || len(r.ByKind("KubeEtcdEncryptionConfig")) > 0 {
				return nil, nil
			}
			for _, d := range r.ByKind("v1alpha1") {
				if talos114.Scalar(d.Root, "cluster", "secretboxEncryptionSecret") != "" || talos114.Scalar(d.Root, "cluster", "aescbcEncryptionSecret") != "" {
					return nil, nil
				}
			}
			return nil, []string{"etcd encryption config is required for control plane machines running kube-apiserver"}
		},
	},
}

// validate114 is steps 1-3 above: the node's load error, or its warnings
// and validation errors (formatted as the node's multierror).
func validate114(data []byte, rc1 bool) (res *talos114.Result, warnings []string, loadErr, validateErr string) {
	res, err := talos114.Load(data)
	if err != nil {
		return nil, nil, err.Error(), ""
	}
	warnings, errs := res.ValidateV113()
	for _, r := range rules114 {
		if r.check == nil || r.rc1 && !rc1 {
			continue
		}
		w, e := r.check(res, rc1)
		warnings, errs = append(warnings, w...), append(errs, e...)
	}
	return res, warnings, "", talos114.FormatErrors(errs)
}

// splitFQDN splits a hostname as Talos does (ParseFQDN): the short name up
// to the first dot, the domain the rest.
func splitFQDN(fqdn string) (hostname, domainname string) {
	hostname, domainname, _ = strings.Cut(fqdn, ".")
	return hostname, domainname
}
