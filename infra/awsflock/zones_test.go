package awsflock

import (
	"slices"
	"testing"
)

// Where AWS lists the zones Fargate serves, only those are chosen, by ID,
// whatever the account calls them; elsewhere every zone is.
func TestFargateZonesByID(t *testing.T) {
	zones := []Zone{{"us-west-1a", "usw1-az3"}, {"us-west-1b", "usw1-az2"}, {"us-west-1c", "usw1-az1"}}
	serves, not := fargateZones("us-west-1", zones)
	if !slices.Equal(serves, []Zone{zones[0], zones[2]}) || !slices.Equal(not, []Zone{zones[1]}) {
		t.Errorf("us-west-1: serves %v, not %v", serves, not)
	}
	if serves, not := fargateZones("eu-west-1", []Zone{{"eu-west-1a", "euw1-az2"}}); len(serves) != 1 || len(not) != 0 {
		t.Errorf("eu-west-1: serves %v, not %v", serves, not)
	}
	if !FargateServes("ap-northeast-1", "apne1-az4") || FargateServes("ap-northeast-1", "apne1-az3") {
		t.Error("ap-northeast-1: Fargate serves apne1-az1, 2 and 4, not 3")
	}
}
