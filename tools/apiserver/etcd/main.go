// Command etcd is etcd's server, built from the go.etcd.io/etcd/server/v3
// version pinned in this module's go.mod, for the tests that run
// kube-apiserver (see ../README.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
