// Command etcdctl runs etcdctl's v3 entry point (go.etcd.io/etcd/etcdctl/v3/ctlv3), the API
// kamaji-etcd's job speaks (ETCDCTL_API unset).
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() {
	ctlv3.MustStart()
}
