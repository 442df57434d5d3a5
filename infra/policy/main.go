// Command policy is the AI Flock policy pack: the isolation invariants of
// the README's security model as Pulumi policies, for both stacks.
//
//	pulumi preview --policy-pack infra/policy -s dev
//
// The Pulumi CLI builds this directory with `go build` (PulumiPolicy.yaml,
// runtime go) and talks to it over the analyzer protocol. The rules live in
// ./rules, their policyx wiring in ./pack.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx"

	"github.com/ai-flock/ai-flock/infra/policy/pack"
)

func main() {
	if err := policyx.Main(pack.New); err != nil {
		cmdutil.ExitError(err.Error())
	}
}
