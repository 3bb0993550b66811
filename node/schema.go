package node

import (
	"encoding"
	"reflect"
	"strings"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/config/types/block"
	"github.com/siderolabs/talos/pkg/machinery/config/types/cri"
	"github.com/siderolabs/talos/pkg/machinery/config/types/hardware"
	"github.com/siderolabs/talos/pkg/machinery/config/types/network"
	"github.com/siderolabs/talos/pkg/machinery/config/types/runtime"
	"github.com/siderolabs/talos/pkg/machinery/config/types/runtime/extensions"
	"github.com/siderolabs/talos/pkg/machinery/config/types/security"
	"github.com/siderolabs/talos/pkg/machinery/config/types/siderolink"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/node/internal/talos114"
)

// The config schema, as the machinery's Go types spell it (yaml tags): which
// keys exist at which place, and which places hold a map (keys are user
// data), a list, a bool or a number. Redaction walks it: a key that is not
// a field at its place is not shown, and neither is any value but a bool or
// number (which cannot hold a secret) or one on the publicFields list.

type schemaKind int

const (
	schemaOpaque schemaKind = iota // a string, or a type that encodes itself
	schemaBool
	schemaNumber
	schemaStruct
	schemaMap
	schemaSeq
)

type schemaNode struct {
	kind   schemaKind
	fields map[string]*schemaNode // schemaStruct
	elem   *schemaNode            // schemaMap, schemaSeq
}

// field is the schema of key under n, or nil if n has no such field.
func (n *schemaNode) field(key string) *schemaNode {
	if n == nil || n.kind != schemaStruct {
		return nil
	}
	return n.fields[key]
}

// v1alpha1Kind names the main machine config document (it has no kind).
const v1alpha1Kind = "v1alpha1"

// documentTypes is every document kind machinery v1.13 registers
// (pkg/machinery/config/types/...), by kind.
func documentTypes() map[string]any {
	return map[string]any{
		v1alpha1Kind:                         v1alpha1.Config{},
		block.ExistingVolumeConfigKind:       block.ExistingVolumeConfigV1Alpha1{},
		block.ExternalVolumeConfigKind:       block.ExternalVolumeConfigV1Alpha1{},
		block.RawVolumeConfigKind:            block.RawVolumeConfigV1Alpha1{},
		block.SwapVolumeConfigKind:           block.SwapVolumeConfigV1Alpha1{},
		block.UserVolumeConfigKind:           block.UserVolumeConfigV1Alpha1{},
		block.VolumeConfigKind:               block.VolumeConfigV1Alpha1{},
		block.ZswapConfigKind:                block.ZswapConfigV1Alpha1{},
		cri.RegistryAuthConfig:               cri.RegistryAuthConfigV1Alpha1{},
		cri.RegistryMirrorConfig:             cri.RegistryMirrorConfigV1Alpha1{},
		cri.RegistryTLSConfig:                cri.RegistryTLSConfigV1Alpha1{},
		hardware.PCIDriverRebindConfig:       hardware.PCIDriverRebindConfigV1Alpha1{},
		network.BlackholeRouteKind:           network.BlackholeRouteConfigV1Alpha1{},
		network.BondKind:                     network.BondConfigV1Alpha1{},
		network.BridgeKind:                   network.BridgeConfigV1Alpha1{},
		network.DHCPv4Kind:                   network.DHCPv4ConfigV1Alpha1{},
		network.DHCPv6Kind:                   network.DHCPv6ConfigV1Alpha1{},
		network.DefaultActionConfig:          network.DefaultActionConfigV1Alpha1{},
		network.DummyLinkKind:                network.DummyLinkConfigV1Alpha1{},
		network.EthernetKind:                 network.EthernetConfigV1Alpha1{},
		network.HCloudVIPKind:                network.HCloudVIPConfigV1Alpha1{},
		network.HostnameKind:                 network.HostnameConfigV1Alpha1{},
		network.KubeSpanKind:                 network.KubeSpanConfigV1Alpha1{},
		network.KubespanEndpointsKind:        network.KubespanEndpointsConfigV1Alpha1{},
		network.Layer2VIPKind:                network.Layer2VIPConfigV1Alpha1{},
		network.LinkAliasKind:                network.LinkAliasConfigV1Alpha1{},
		network.LinkKind:                     network.LinkConfigV1Alpha1{},
		network.ResolverKind:                 network.ResolverConfigV1Alpha1{},
		network.RoutingRuleKind:              network.RoutingRuleConfigV1Alpha1{},
		network.RuleConfigKind:               network.RuleConfigV1Alpha1{},
		network.StaticHostKind:               network.StaticHostConfigV1Alpha1{},
		network.TCPProbeKind:                 network.TCPProbeConfigV1Alpha1{},
		network.TimeSyncKind:                 network.TimeSyncConfigV1Alpha1{},
		network.VLANKind:                     network.VLANConfigV1Alpha1{},
		network.VRFKind:                      network.VRFConfigV1Alpha1{},
		network.WireguardKind:                network.WireguardConfigV1Alpha1{},
		runtime.EnvironmentConfigKind:        runtime.EnvironmentV1Alpha1{},
		runtime.EventSinkKind:                runtime.EventSinkV1Alpha1{},
		runtime.KmsgLogKind:                  runtime.KmsgLogV1Alpha1{},
		runtime.OOMKind:                      runtime.OOMV1Alpha1{},
		runtime.WatchdogTimerKind:            runtime.WatchdogTimerV1Alpha1{},
		extensions.ServiceConfigKind:         extensions.ServiceConfigV1Alpha1{},
		security.ImageVerificationConfigKind: security.ImageVerificationConfigV1Alpha1{},
		security.TrustedRootsConfig:          security.TrustedRootsConfigV1Alpha1{},
		siderolink.Kind:                      siderolink.ConfigV1Alpha1{},
	}
}

// documentSchemas is the schema of each document kind, built once: the
// machinery v1.13 types, and where Talos v1.14 registers a kind v1.13 does
// not know or adds fields to one it does, the v1.14 key tree
// (talos114.Schema, generated from the v1.14.0-rc.1 source).
var documentSchemas = sync.OnceValue(func() map[string]*schemaNode {
	memo := map[reflect.Type]*schemaNode{}
	out := map[string]*schemaNode{}
	for kind, v := range documentTypes() {
		out[kind] = schemaOf(reflect.TypeOf(v), memo)
	}
	for kind, n := range talos114.Schema() {
		out[kind] = mergeSchema(out[kind], n)
	}
	return out
})

// mergeSchema is n (from machinery v1.13) with the places only the v1.14
// tree t has. Where both know a place, v1.13's shape stays, unless v1.13
// sees just an opaque value there and v1.14 a collection. The v1.13 nodes
// are shared between places (memo), so they are copied, never changed.
func mergeSchema(n *schemaNode, t *talos114.Key) *schemaNode {
	if t == nil {
		return n
	}
	tk := shapeKind[t.Shape]
	if n == nil || n.kind == schemaOpaque && tk != schemaOpaque {
		n = &schemaNode{kind: tk}
	}
	if n.kind != tk {
		return n
	}
	out := &schemaNode{kind: n.kind}
	switch n.kind {
	case schemaStruct:
		out.fields = make(map[string]*schemaNode, max(len(n.fields), len(t.Fields)))
		for k, f := range n.fields {
			out.fields[k] = f
		}
		for k, f := range t.Fields {
			out.fields[k] = mergeSchema(n.fields[k], f)
		}
	case schemaMap, schemaSeq:
		out.elem = mergeSchema(n.elem, t.Elem)
	}
	return out
}

var shapeKind = map[talos114.Shape]schemaKind{
	talos114.ShapeScalar: schemaOpaque,
	talos114.ShapeBool:   schemaBool,
	talos114.ShapeNumber: schemaNumber,
	talos114.ShapeStruct: schemaStruct,
	talos114.ShapeMap:    schemaMap,
	talos114.ShapeList:   schemaSeq,
}

var (
	yamlMarshaler = reflect.TypeFor[yaml.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// schemaOf follows t as gopkg.in/yaml.v3 encodes it.
func schemaOf(t reflect.Type, memo map[reflect.Type]*schemaNode) *schemaNode {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := memo[t]; ok {
		return n
	}
	n := &schemaNode{}
	memo[t] = n // before recursing: the types are recursive in places
	if t.Kind() != reflect.Struct && (t.Implements(yamlMarshaler) || reflect.PointerTo(t).Implements(yamlMarshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)) {
		return n // encodes itself: opaque (a struct that does keeps its keys: a certificate's crt and key)
	}
	switch t.Kind() {
	case reflect.Bool:
		n.kind = schemaBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		n.kind = schemaNumber
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return n // []byte: base64 text
		}
		n.kind, n.elem = schemaSeq, schemaOf(t.Elem(), memo)
	case reflect.Map:
		n.kind, n.elem = schemaMap, schemaOf(t.Elem(), memo)
	case reflect.Struct:
		n.kind, n.fields = schemaStruct, map[string]*schemaNode{}
		addFields(n, t, memo)
	}
	return n
}

func addFields(n *schemaNode, t reflect.Type, memo map[reflect.Type]*schemaNode) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(n, ft, memo)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default
		}
		n.fields[name] = schemaOf(f.Type, memo)
	}
}
