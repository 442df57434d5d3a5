package awsflock

import (
	"fmt"
	"slices"
	"strings"
)

// FargateZones are the Availability Zones Fargate serves, by zone ID, in
// the regions where AWS documents that it serves only some ("Supported
// Regions for Amazon ECS on AWS Fargate", Linux containers, read on
// FargateZonesAsOf): in every other region it serves every zone. No API
// says which, and zone names differ per account (us-west-1a is not the same
// zone everywhere), so the stack chooses by ID and this table is kept by
// hand.
var FargateZones = map[string][]string{
	"us-west-1":      {"usw1-az1", "usw1-az3"},
	"ap-northeast-1": {"apne1-az1", "apne1-az2", "apne1-az4"},
	"cn-north-1":     {"cnn1-az1", "cnn1-az2"},
}

// FargateZonesAsOf is when FargateZones was read from AWS's table.
const FargateZonesAsOf = "2026-12-02"

// Zone is an Availability Zone: its name in this account, its ID everywhere.
type Zone struct{ Name, ID string }

func (z Zone) String() string { return z.Name + " (" + z.ID + ")" }

// FargateServes reports whether Fargate runs tasks in the zone whose ID is id.
func FargateServes(region, id string) bool {
	only, listed := FargateZones[region]
	return !listed || slices.Contains(only, id)
}

// fargateZones splits zones into those Fargate serves and the rest, each
// in the order given.
func fargateZones(region string, zones []Zone) (serves, not []Zone) {
	for _, z := range zones {
		if FargateServes(region, z.ID) {
			serves = append(serves, z)
		} else {
			not = append(not, z)
		}
	}
	return serves, not
}

// fargateNote says which zones of the region Fargate does not serve, for
// an error.
func fargateNote(region string, not []Zone) string {
	if len(not) == 0 {
		return ""
	}
	var s []string
	for _, z := range not {
		s = append(s, z.String())
	}
	return fmt.Sprintf("; Fargate does not serve %s (only %s, by AWS's Fargate Regions table as of %s)", strings.Join(s, ", "), strings.Join(FargateZones[region], ", "), FargateZonesAsOf)
}
