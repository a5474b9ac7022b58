// Command etcd runs the real etcd server, unchanged, as the API server's store in Spindle's tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
