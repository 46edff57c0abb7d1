// Command pulumi-resource-kubernetes serves the upstream provider with the schema and mapping
// that the upstream main embeds; the build script generates the two JSON files from the
// module's schema.json and terraform-mapping.json (upstream does it with go generate).
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
