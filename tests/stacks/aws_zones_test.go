package stacks_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The zones the stack puts its subnets in are Availability Zones: the mock
// account also sees a Local Zone and a Wavelength Zone, listed first (as
// EC2 lists zones by name), where neither Fargate nor EFS runs.
func TestAWSSubnetsInAvailabilityZones(t *testing.T) {
	for name, cfg := range map[string]capture.Config{
		"endpoints": {},
		"nat":       {"flock:aws": `{"egress": "nat", "availabilityZones": 3}`},
	} {
		s := awsStack(t, cfg)
		zones := map[string]bool{}
		for _, sub := range s.ByType(awsrules.TypeSubnet) {
			z := sub.String("availabilityZone")
			zones[z] = true
			if !strings.HasPrefix(z, "eu-west-1") || z == capture.MockLocalZone || z == capture.MockWavelengthZone {
				t.Errorf("%s: %s is in %s, not an Availability Zone", name, sub.Name, z)
			}
		}
		for _, z := range capture.MockZones[:2] {
			if !zones[z] {
				t.Errorf("%s: no subnet in %s (zones: %v)", name, z, zones)
			}
		}
	}
	s := awsGatewayStack(t, capture.Config{"flock:gateway": `{"upstreams": {"anthropic": {}}}`})
	for _, sub := range s.ByType(awsrules.TypeSubnet) {
		if z := sub.String("availabilityZone"); z == capture.MockLocalZone || z == capture.MockWavelengthZone {
			t.Errorf("gateway stack: %s is in %s", sub.Name, z)
		}
	}
}

// With an existing VPC each subnet is looked up: one of another VPC, in a
// Local Zone, or in a zone another listed subnet is in (EFS: one mount
// target per zone) is refused by its key, all at once, before anything is
// declared in them.
func TestAWSExistingSubnetsChecked(t *testing.T) {
	vpc := func(subnets string) capture.Config {
		return capture.Config{"flock:aws": `{"vpcId":"` + capture.MockVPC + `","subnetIds":[` + subnets + `],"routeTableIds":["rtb-0cccccccccccccccc"]}`}
	}
	if _, err := capture.RunAWS(vpc(`"subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb","subnet-0cccccccccccccccc"`)); err != nil {
		t.Fatalf("three subnets of the VPC in three zones refused: %v", err)
	}
	s, err := capture.RunAWS(vpc(`"subnet-0aaaaaaaaaaaaaaaa","subnet-0aaaaaaaaaaaaaaa2","subnet-0fffffffffffffff0","subnet-0111111111111111e","subnet-0999999999999999a"`))
	if err == nil {
		t.Fatal("subnets of another VPC, in one zone and in a Local Zone accepted")
	}
	for _, w := range []string{
		"flock:aws.subnetIds[1]: subnet-0aaaaaaaaaaaaaaa2 is in eu-west-1a, like flock:aws.subnetIds[0] (subnet-0aaaaaaaaaaaaaaaa): EFS takes one mount target per Availability Zone",
		"flock:aws.subnetIds[2]: subnet-0fffffffffffffff0 is a subnet of vpc-0fedcba9876543210, not of flock:aws.vpcId " + capture.MockVPC,
		"flock:aws.subnetIds[3]: subnet-0111111111111111e is in " + capture.MockLocalZone + ", which is not an available Availability Zone of the region",
		"flock:aws.subnetIds[4]: subnet-0999999999999999a: no such subnet",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error lacks %q:\n%v", w, err)
		}
	}
	for _, r := range s.Resources {
		if strings.HasPrefix(r.Type, "aws:") {
			t.Errorf("declared %s %s in subnets that were refused", r.Type, r.Name)
		}
	}
}

// Fargate runs tasks in only some zones of some regions, known by zone ID
// (awsflock.FargateZones; zone names differ per account): the stack
// chooses its zones among those, and refuses at preview a choice outside
// them, naming the key. Here the mock region is given such an exception.
func TestAWSZonesFargateServes(t *testing.T) {
	old, had := awsflock.FargateZones[capture.MockRegion]
	awsflock.FargateZones[capture.MockRegion] = []string{"euw1-az2", "euw1-az3"}
	t.Cleanup(func() {
		if had {
			awsflock.FargateZones[capture.MockRegion] = old
		} else {
			delete(awsflock.FargateZones, capture.MockRegion)
		}
	})
	s := awsStack(t, capture.Config{})
	zones := map[string]bool{}
	for _, sub := range s.ByType(awsrules.TypeSubnet) {
		zones[sub.String("availabilityZone")] = true
	}
	if want := map[string]bool{capture.MockZones[1]: true, capture.MockZones[2]: true}; !maps.Equal(zones, want) {
		t.Errorf("subnets in %v, want the two zones Fargate serves %v", zones, want)
	}
	_, err := capture.RunAWS(capture.Config{"flock:aws": `{"availabilityZones": 3}`})
	if err == nil || !strings.Contains(err.Error(), "flock:aws.availabilityZones: the region "+capture.MockRegion+" has 2 available Availability Zones where Fargate runs tasks, 3 asked; Fargate does not serve "+capture.MockZones[0]+" (euw1-az1)") {
		t.Errorf("three zones where Fargate serves two: %v", err)
	}
	_, err = capture.RunAWS(capture.Config{"flock:aws": `{"vpcId":"` + capture.MockVPC + `","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"],"routeTableIds":["rtb-0cccccccccccccccc"]}`})
	if err == nil || !strings.Contains(err.Error(), "flock:aws.subnetIds[0]: subnet-0aaaaaaaaaaaaaaaa is in "+capture.MockZones[0]+" (euw1-az1), a zone where Fargate runs no tasks") {
		t.Errorf("an existing subnet in a zone Fargate does not serve: %v", err)
	}
}
