//go:build tools

package tools

// The provisioner's main package (the module's root), imported so that this module's requirements
// and go.sum cover it; `go build` builds it from here.
import _ "github.com/rancher/local-path-provisioner"
