// Command pause is the sandbox ("pause") container of the kind node image built by
// hack/kind/build.sh: no registry is reachable here, so registry.k8s.io/pause cannot be
// pulled. It does what kubernetes/build/pause/linux/pause.c does: hold the pod's namespaces
// open, reap the zombies of a shared PID namespace, and exit on SIGINT/SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (llmbench hack/kind, Go)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		}
		// Reap every exited child (a pod sharing its PID namespace re-parents orphans here).
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
