// Wrapper module: builds pulumi-resource-kubernetes v4.25.0 from the Go module proxy.
// provider/v4 has no tags of its own, so it is required at the pseudo-version of the
// v4.25.0 commit; its relative replace of sdk/v4 is turned into a require of the tag.
module gpu-tenancy/tools/kubernetes

go 1.26.6

require (
	github.com/pulumi/pulumi-kubernetes/provider/v4 v4.0.0-20260115033456-f47bc2d6f199
	github.com/pulumi/pulumi-kubernetes/sdk/v4 v4.25.0
)
