package stacks_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// Each agent's output to CloudWatch Logs is bounded by its own init
// (flock:aws.logRateKiB), and an alarm on its log group's IncomingBytes
// pages when it writes at the bound.
func TestAWSAgentLogBound(t *testing.T) {
	for _, c := range []struct {
		cfg  capture.Config
		rate int
	}{
		{nil, awsflock.DefaultLogRateKiB},
		{capture.Config{"flock:aws": `{"logRateKiB": 64, "alarmActions": ["arn:aws:sns:eu-west-1:123456789012:flock-alarms"]}`}, 64},
	} {
		s := awsStack(t, c.cfg)
		for _, id := range awsAgentIDs(3) {
			td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+id+"-task")
			var defs []awsflock.ContainerDefinition
			if err := json.Unmarshal([]byte(td.String("containerDefinitions")), &defs); err != nil {
				t.Fatal(err)
			}
			want := []string{"init", "--rate", strconv.Itoa(c.rate << 10), "--burst", strconv.Itoa(awsflock.LogBurstFactor * c.rate << 10), "--", "/flock-agent", "run"}
			if !reflect.DeepEqual(defs[0].Command, want) || defs[0].LinuxParameters.InitProcessEnabled {
				t.Errorf("%s: command %v (ECS init %v), want %v and no ECS init", id, defs[0].Command, defs[0].LinuxParameters.InitProcessEnabled, want)
			}
			al := awsGet(t, s, awsrules.TypeMetricAlarm, "flock-"+id+"-log-rate").Inputs.Mappable()
			dims, _ := al["dimensions"].(map[string]any)
			lg := awsGet(t, s, awsrules.TypeLogGroup, "flock-"+id+"-logs")
			if al["namespace"] != "AWS/Logs" || al["metricName"] != "IncomingBytes" || al["statistic"] != "Sum" || al["period"] != float64(300) ||
				dims["LogGroupName"] != lg.String("name") || al["threshold"] != float64(c.rate<<10)*300/2 || al["comparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("%s: log alarm %v, want IncomingBytes of %s over %d bytes in 5 minutes", id, al, lg.String("name"), c.rate<<10*300/2)
			}
			if c.cfg != nil && !reflect.DeepEqual(al["alarmActions"], []any{"arn:aws:sns:eu-west-1:123456789012:flock-alarms"}) {
				t.Errorf("%s: alarm actions %v", id, al["alarmActions"])
			}
		}
	}
	for _, bad := range []string{"0", "1025"} {
		_, err := capture.RunAWS(capture.Config{"flock:aws": `{"logRateKiB": ` + bad + `}`})
		if err == nil || !strings.Contains(err.Error(), "flock:aws.logRateKiB: must be 1 to 1024") {
			t.Errorf("logRateKiB %s: %v", bad, err)
		}
	}
}
