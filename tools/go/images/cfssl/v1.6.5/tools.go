//go:build tools

package tools

// The commands kamaji-etcd's certificate job runs (cfssl gencert | cfssljson -bare), imported so
// that this module's requirements and go.sum cover them.
import (
	_ "github.com/cloudflare/cfssl/cmd/cfssl"
	_ "github.com/cloudflare/cfssl/cmd/cfssljson"
)
