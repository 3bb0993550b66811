package talos114

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/siderolabs/talos/pkg/machinery/proto"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

// ImageFactorySchematic is Talos v1.14's resource naming the factory that
// built the booted image (pkg/machinery/resources/runtime/image_factory_schematic.go,
// v1.14.0-rc.1; not sensitive). Machinery v1.13 lacks it: this is the same
// type, spec and protobuf field numbers, so a COSI client can read it.
type ImageFactorySchematic = typed.Resource[ImageFactorySchematicSpec, imageFactorySchematicExtension]

// ImageFactorySchematic's type and singleton ID.
const (
	ImageFactorySchematicType = resource.Type("ImageFactorySchematics.runtime.talos.dev")
	ImageFactorySchematicID   = resource.ID("image-factory-schematic")
)

// ImageFactorySchematicSpec: the schematic ID, the factory's flavor and its
// API URL (parsed by the node from the schematic extension's author,
// "Image Factory (https://factory.talos.dev)").
type ImageFactorySchematicSpec struct {
	SchematicID string `yaml:"schematicId" protobuf:"1"`
	Flavor      string `yaml:"flavor" protobuf:"2"`
	APIURL      string `yaml:"apiUrl" protobuf:"3"`
}

// DeepCopy implements typed.DeepCopyable.
func (s ImageFactorySchematicSpec) DeepCopy() ImageFactorySchematicSpec { return s }

// NewImageFactorySchematic makes the singleton resource.
func NewImageFactorySchematic() *ImageFactorySchematic {
	return typed.NewResource[ImageFactorySchematicSpec, imageFactorySchematicExtension](
		resource.NewMetadata(runtime.NamespaceName, ImageFactorySchematicType, ImageFactorySchematicID, resource.VersionUndefined),
		ImageFactorySchematicSpec{},
	)
}

type imageFactorySchematicExtension struct{}

func (imageFactorySchematicExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{Type: ImageFactorySchematicType, DefaultNamespace: runtime.NamespaceName}
}

func init() {
	proto.RegisterDefaultTypes()
	if err := protobuf.RegisterDynamic[ImageFactorySchematicSpec](ImageFactorySchematicType, &ImageFactorySchematic{}); err != nil {
		panic(err)
	}
}
