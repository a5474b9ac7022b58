// Command kube-controller-manager runs the real controllers the tests rely on (garbage
// collection through ownerReferences, namespaces, service accounts), unchanged.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
