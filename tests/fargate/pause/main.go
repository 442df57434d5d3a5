// Command pause holds a replayed Fargate task's network namespace: every
// container of the task joins it (they share localhost and one address, as
// on Fargate). It does nothing until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
