// Command ai-flock is the Pulumi program of every AI Flock stack.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/stacks"
)

func main() { pulumi.Run(stacks.Run) }
