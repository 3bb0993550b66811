// Package talos114 is what talosflash knows of Talos v1.14 configs that its
// Talos machinery (v1.13; the module proxy serves no v1.14) does not: the
// document kinds v1.14.0-rc.1 registers, the fields it added to kinds v1.13
// already knows, and a loader that checks a 1.14 config with machinery v1.13
// as far as v1.13 can decide. The fake node (node/nodetest) and the local
// check (node.LoadConfig) share it; tests hold both to what Talos v1.14
// decides (`talosctl validate` of a talosctl v1.14 on PATH, where there is one).
package talos114

import (
	"maps"
	"slices"
)

// Kinds are the config document kinds Talos v1.14.0-rc.1 registers
// (registry.Register in pkg/machinery/config/types/...), each with its
// upstream file and whether machinery v1.13.9 registers it too.
var Kinds = map[string]Kind{
	"BGPInstanceConfig":            {Source: "pkg/machinery/config/types/network/bgp.go", InV113: false},
	"BlackholeRouteConfig":         {Source: "pkg/machinery/config/types/network/blackhole_route.go", InV113: true},
	"BondConfig":                   {Source: "pkg/machinery/config/types/network/bond.go", InV113: true},
	"BridgeConfig":                 {Source: "pkg/machinery/config/types/network/bridge.go", InV113: true},
	"CRIBaseRuntimeSpecConfig":     {Source: "pkg/machinery/config/types/cri/base_runtime_spec.go", InV113: false},
	"CRICustomizationConfig":       {Source: "pkg/machinery/config/types/cri/customization.go", InV113: false},
	"ContainerConfig":              {Source: "pkg/machinery/config/types/container/container_config.go", InV113: false},
	"DHCPv4Config":                 {Source: "pkg/machinery/config/types/network/dhcp4.go", InV113: true},
	"DHCPv6Config":                 {Source: "pkg/machinery/config/types/network/dhcp6.go", InV113: true},
	"DiscoveryIdentityConfig":      {Source: "pkg/machinery/config/types/cluster/discovery_identity.go", InV113: false},
	"DiscoveryServiceConfig":       {Source: "pkg/machinery/config/types/cluster/discovery_service.go", InV113: false},
	"DummyLinkConfig":              {Source: "pkg/machinery/config/types/network/dummy.go", InV113: true},
	"EnvironmentConfig":            {Source: "pkg/machinery/config/types/runtime/environment.go", InV113: true},
	"EtcFileConfig":                {Source: "pkg/machinery/config/types/runtime/etc_file.go", InV113: false},
	"EthernetConfig":               {Source: "pkg/machinery/config/types/network/ethernet.go", InV113: true},
	"EventSinkConfig":              {Source: "pkg/machinery/config/types/runtime/event_sink.go", InV113: true},
	"ExistingVolumeConfig":         {Source: "pkg/machinery/config/types/block/existing_volume_config.go", InV113: true},
	"ExtensionServiceConfig":       {Source: "pkg/machinery/config/types/runtime/extensions/service_config.go", InV113: true},
	"ExternalVolumeConfig":         {Source: "pkg/machinery/config/types/block/external_volume_config.go", InV113: true},
	"FilesystemScrubConfig":        {Source: "pkg/machinery/config/types/block/fs_scrub.go", InV113: false},
	"FilesystemTrimConfig":         {Source: "pkg/machinery/config/types/block/filesystem_trim_config.go", InV113: false},
	"HCloudVIPConfig":              {Source: "pkg/machinery/config/types/network/hcloud_vip.go", InV113: true},
	"HTTPProbeConfig":              {Source: "pkg/machinery/config/types/network/http_probe.go", InV113: false},
	"HostnameConfig":               {Source: "pkg/machinery/config/types/network/hostname.go", InV113: true},
	"ImageCacheConfig":             {Source: "pkg/machinery/config/types/cri/image_cache.go", InV113: false},
	"ImageVerificationConfig":      {Source: "pkg/machinery/config/types/security/image_verification.go", InV113: true},
	"KernelModuleConfig":           {Source: "pkg/machinery/config/types/runtime/kernel_module.go", InV113: false},
	"KmsgLogConfig":                {Source: "pkg/machinery/config/types/runtime/kmsg_log.go", InV113: true},
	"KubeAPIServerCAConfig":        {Source: "pkg/machinery/config/types/k8s/apiserver_ca.go", InV113: false},
	"KubeAPIServerConfig":          {Source: "pkg/machinery/config/types/k8s/apiserver.go", InV113: false},
	"KubeAdmissionControlConfig":   {Source: "pkg/machinery/config/types/k8s/admission_control.go", InV113: false},
	"KubeAggregatorCAConfig":       {Source: "pkg/machinery/config/types/k8s/aggregator_ca.go", InV113: false},
	"KubeAuditPolicyConfig":        {Source: "pkg/machinery/config/types/k8s/audit_policy.go", InV113: false},
	"KubeAuthenticationConfig":     {Source: "pkg/machinery/config/types/k8s/authentication.go", InV113: false},
	"KubeAuthorizerConfig":         {Source: "pkg/machinery/config/types/k8s/authorization.go", InV113: false},
	"KubeClusterConfig":            {Source: "pkg/machinery/config/types/k8s/cluster.go", InV113: false},
	"KubeControllerManagerConfig":  {Source: "pkg/machinery/config/types/k8s/controller_manager.go", InV113: false},
	"KubeCoreDNSConfig":            {Source: "pkg/machinery/config/types/k8s/coredns.go", InV113: false},
	"KubeCredentialProviderConfig": {Source: "pkg/machinery/config/types/k8s/credential_provider.go", InV113: false},
	"KubeEtcdEncryptionConfig":     {Source: "pkg/machinery/config/types/k8s/etcd_encryption.go", InV113: false},
	"KubeExternalManifestConfig":   {Source: "pkg/machinery/config/types/k8s/external_manifest.go", InV113: false},
	"KubeFlannelCNIConfig":         {Source: "pkg/machinery/config/types/k8s/flannel.go", InV113: false},
	"KubeInlineManifestConfig":     {Source: "pkg/machinery/config/types/k8s/inline_manifest.go", InV113: false},
	"KubeNetworkConfig":            {Source: "pkg/machinery/config/types/k8s/network.go", InV113: false},
	"KubeNodeConfig":               {Source: "pkg/machinery/config/types/k8s/node.go", InV113: false},
	"KubePrismConfig":              {Source: "pkg/machinery/config/types/k8s/kubeprism.go", InV113: false},
	"KubeProxyConfig":              {Source: "pkg/machinery/config/types/k8s/proxy.go", InV113: false},
	"KubeSchedulerConfig":          {Source: "pkg/machinery/config/types/k8s/scheduler.go", InV113: false},
	"KubeServiceAccountConfig":     {Source: "pkg/machinery/config/types/k8s/service_account.go", InV113: false},
	"KubeSpanConfig":               {Source: "pkg/machinery/config/types/network/kubespan.go", InV113: true},
	"KubeSpanEndpointsConfig":      {Source: "pkg/machinery/config/types/network/kubespan_endpoints.go", InV113: true},
	"KubeStaticPodConfig":          {Source: "pkg/machinery/config/types/k8s/static_pod.go", InV113: false},
	"KubeTalosAPIAccessConfig":     {Source: "pkg/machinery/config/types/k8s/talos_api_access.go", InV113: false},
	"KubeletConfig":                {Source: "pkg/machinery/config/types/k8s/kubelet.go", InV113: false},
	"LVMLogicalVolumeConfig":       {Source: "pkg/machinery/config/types/storage/lvm_logical_volume_config.go", InV113: false},
	"LVMVolumeGroupConfig":         {Source: "pkg/machinery/config/types/storage/lvm_volume_group_config.go", InV113: false},
	"Layer2VIPConfig":              {Source: "pkg/machinery/config/types/network/layer2_vip.go", InV113: true},
	"LinkAliasConfig":              {Source: "pkg/machinery/config/types/network/link_alias.go", InV113: true},
	"LinkConfig":                   {Source: "pkg/machinery/config/types/network/link.go", InV113: true},
	"NetworkDefaultActionConfig":   {Source: "pkg/machinery/config/types/network/default_action_config.go", InV113: true},
	"NetworkRuleConfig":            {Source: "pkg/machinery/config/types/network/rule_config.go", InV113: true},
	"OOMConfig":                    {Source: "pkg/machinery/config/types/runtime/oom.go", InV113: true},
	"PCIDriverRebindConfig":        {Source: "pkg/machinery/config/types/hardware/pci_driver_rebind_config.go", InV113: true},
	"RAIDArrayConfig":              {Source: "pkg/machinery/config/types/storage/raid_array_config.go", InV113: false},
	"RawVolumeConfig":              {Source: "pkg/machinery/config/types/block/raw_volume_config.go", InV113: true},
	"RegistryAuthConfig":           {Source: "pkg/machinery/config/types/cri/registry_auth.go", InV113: true},
	"RegistryMirrorConfig":         {Source: "pkg/machinery/config/types/cri/registry_mirror.go", InV113: true},
	"RegistryTLSConfig":            {Source: "pkg/machinery/config/types/cri/registry_tls.go", InV113: true},
	"ResolverConfig":               {Source: "pkg/machinery/config/types/network/resolver.go", InV113: true},
	"RoutingRuleConfig":            {Source: "pkg/machinery/config/types/network/routing_rule.go", InV113: true},
	"SecurityProfileConfig":        {Source: "pkg/machinery/config/types/runtime/security_profile_config.go", InV113: false},
	"SideroLinkConfig":             {Source: "pkg/machinery/config/types/siderolink/siderolink.go", InV113: true},
	"StaticHostConfig":             {Source: "pkg/machinery/config/types/network/static_host.go", InV113: true},
	"SwapVolumeConfig":             {Source: "pkg/machinery/config/types/block/swap_volume_config.go", InV113: true},
	"SysctlConfig":                 {Source: "pkg/machinery/config/types/runtime/sysctl.go", InV113: false},
	"SysfsConfig":                  {Source: "pkg/machinery/config/types/runtime/sysfs.go", InV113: false},
	"TCPProbeConfig":               {Source: "pkg/machinery/config/types/network/tcp_probe.go", InV113: true},
	"TimeSyncConfig":               {Source: "pkg/machinery/config/types/network/time_sync.go", InV113: true},
	"TrustedRootsConfig":           {Source: "pkg/machinery/config/types/security/trusted_roots.go", InV113: true},
	"UdevRulesConfig":              {Source: "pkg/machinery/config/types/runtime/udev_rules.go", InV113: false},
	"UnattendedInstallConfig":      {Source: "pkg/machinery/config/types/runtime/unattended_install.go", InV113: false},
	"UserVolumeConfig":             {Source: "pkg/machinery/config/types/block/user_volume_config.go", InV113: true},
	"VLANConfig":                   {Source: "pkg/machinery/config/types/network/vlan.go", InV113: true},
	"VRFConfig":                    {Source: "pkg/machinery/config/types/network/vrf.go", InV113: true},
	"VethConfig":                   {Source: "pkg/machinery/config/types/network/veth.go", InV113: false},
	"VolumeConfig":                 {Source: "pkg/machinery/config/types/block/volume_config.go", InV113: true},
	"WatchdogTimerConfig":          {Source: "pkg/machinery/config/types/runtime/watchdog_timer.go", InV113: true},
	"WireguardConfig":              {Source: "pkg/machinery/config/types/network/wireguard.go", InV113: true},
	"ZswapConfig":                  {Source: "pkg/machinery/config/types/block/zswap_config.go", InV113: true},
	"v1alpha1":                     {Source: "pkg/machinery/config/types/v1alpha1/v1alpha1_types.go", InV113: true},
}

// Kind is one registered document kind.
type Kind struct {
	Source string // file in siderolabs/talos v1.14.0-rc.1 that registers it
	InV113 bool   // machinery v1.13.9 registers it too (and can decode it)
}

// KindNames are the kinds a Talos v1.14 node knows, sorted.
func KindNames() []string { return slices.Sorted(maps.Keys(Kinds)) }

// Registered reports whether a Talos v1.14 node knows kind.
func Registered(kind string) bool { _, ok := Kinds[kind]; return ok }

// NewerThanV113 reports whether kind is registered in v1.14 but not in
// machinery v1.13: v1.13 cannot decode or validate such a document.
func NewerThanV113(kind string) bool { k, ok := Kinds[kind]; return ok && !k.InV113 }

// ControlPlaneOnlyKinds implement container.ControlplaneOnlyConfig
// (pkg/machinery/config/types/k8s/*.go, ControlplaneOnlyDocument): a v1.14
// node refuses them on a worker (pkg/machinery/config/container/validate.go).
var ControlPlaneOnlyKinds = []string{
	"KubeAPIServerConfig", "KubeAdmissionControlConfig", "KubeAggregatorCAConfig", "KubeAuditPolicyConfig",
	"KubeAuthenticationConfig", "KubeAuthorizerConfig", "KubeControllerManagerConfig", "KubeCoreDNSConfig",
	"KubeEtcdEncryptionConfig", "KubeFlannelCNIConfig", "KubeProxyConfig", "KubeSchedulerConfig",
	"KubeServiceAccountConfig", "KubeTalosAPIAccessConfig",
}
