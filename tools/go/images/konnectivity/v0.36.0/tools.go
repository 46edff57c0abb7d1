//go:build tools

package tools

// The images' commands (cmd/server is proxy-server, cmd/agent proxy-agent), imported so that this
// module's requirements and go.sum cover them.
import (
	_ "sigs.k8s.io/apiserver-network-proxy/cmd/agent"
	_ "sigs.k8s.io/apiserver-network-proxy/cmd/server"
)
