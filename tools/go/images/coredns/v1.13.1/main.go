// Command coredns is upstream's coredns.go: every plugin of its plugin.cfg, then its own main.
package main

import (
	_ "github.com/coredns/coredns/core/plugin"
	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
