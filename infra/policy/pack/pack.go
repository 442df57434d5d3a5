// Package pack serves the rules of infra/policy/rules to the Pulumi engine
// through policyx, the Go policy SDK: one policyx policy per registry entry,
// with the registry's enforcement level, running the very same rule function
// the tests run.
package pack

import (
	"context"
	"fmt"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx"

	"github.com/ai-flock/ai-flock/infra/policy/rules"
)

// Name and Version of the pack as the engine reports them.
const (
	Name    = "ai-flock"
	Version = "1.0.0"
)

// New builds the policy pack; it is the factory policyx.Main calls once the
// engine has told the pack which stack it checks.
func New(*pulumi.Context) (policyx.PolicyPack, error) {
	policies, err := Policies()
	if err != nil {
		return nil, err
	}
	return policyx.NewPolicyPack(Name, semver.MustParse(Version), policyx.EnforcementLevelMandatory, policies)
}

// Level maps a registry level to policyx's. An unset level is an error: an
// unset policyx level would silently mean advisory.
func Level(l rules.Level) (policyx.EnforcementLevel, error) {
	switch l {
	case rules.Mandatory:
		return policyx.EnforcementLevelMandatory, nil
	case rules.Advisory:
		return policyx.EnforcementLevelAdvisory, nil
	}
	return 0, fmt.Errorf("enforcement level %v is not advisory or mandatory", l)
}

// Policies turns every registry entry into a policyx policy.
func Policies() ([]policyx.Policy, error) {
	var out []policyx.Policy
	for _, p := range rules.All() {
		level, err := Level(p.Level)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		switch {
		case p.Resource != nil && p.Stack == nil:
			out = append(out, policyx.NewResourceValidationPolicy(p.Name, policyx.ResourceValidationPolicyArgs{
				Description:      p.Description,
				EnforcementLevel: level,
				ValidateResource: validateResource(p),
			}))
		case p.Stack != nil && p.Resource == nil:
			out = append(out, policyx.NewStackValidationPolicy(p.Name, policyx.StackValidationPolicyArgs{
				Description:      p.Description,
				EnforcementLevel: level,
				ValidateStack:    validateStack(p),
			}))
		default:
			return nil, fmt.Errorf("policy %s: set exactly one of Resource or Stack", p.Name)
		}
	}
	return out, nil
}

// FromAnalyzer is the rules' view of a resource the engine hands to the pack.
func FromAnalyzer(r policyx.AnalyzerResource) rules.Resource {
	return rules.Resource{
		Type:  r.Type,
		Name:  r.Name,
		URN:   r.URN,
		Props: rules.FromPropertyMap(r.Properties),
		Deps:  r.Dependencies,
	}
}

func validateResource(p rules.Policy) func(context.Context, policyx.ResourceValidationArgs) error {
	return func(_ context.Context, args policyx.ResourceValidationArgs) error {
		if !p.AppliesTo(args.Resource.Type) {
			return nil
		}
		for _, v := range p.CheckResource(FromAnalyzer(args.Resource)) {
			args.Manager.ReportViolation(v.Message(), v.URN)
		}
		return nil
	}
}

func validateStack(p rules.Policy) func(context.Context, policyx.StackValidationArgs) error {
	return func(_ context.Context, args policyx.StackValidationArgs) error {
		rs := make([]rules.Resource, 0, len(args.Resources))
		for _, r := range args.Resources {
			rs = append(rs, FromAnalyzer(r))
		}
		for _, v := range p.CheckStack(rs) {
			args.Manager.ReportViolation(v.Message(), v.URN)
		}
		return nil
	}
}
