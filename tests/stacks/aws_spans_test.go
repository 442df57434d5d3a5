package stacks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// Span export on aws goes out through the gateway: the services derive
// spans, the gateway's security group gains egress on the collector's port
// (none for 443, already open), and nothing else changes; without an
// endpoint, none of it is declared.
func TestAWSSpanExport(t *testing.T) {
	s := awsGatewayStack(t, capture.Config{"flock:otlp": `{"endpoint": "http://collector.example.internal:4318"}`})
	td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-services-task")
	if !strings.Contains(td.String("containerDefinitions"), `"name":"`+protocol.EnvServicesSpans+`","value":"on"`) {
		t.Errorf("the services do not derive spans: %s", td.String("containerDefinitions"))
	}
	rule := awsGet(t, s, awsrules.TypeSecurityGroupRule, "flock-sg-gateway-to-otlp")
	if rule.String("type") != "egress" || num(rule, "fromPort") != 4318 || num(rule, "toPort") != 4318 ||
		fmt.Sprint(rule.Plain()["cidrBlocks"]) != "[0.0.0.0/0]" || !strings.Contains(rule.String("securityGroupId"), "gateway") {
		t.Errorf("the gateway's egress to the collector: %+v", rule.Plain())
	}
	for _, r := range s.ByType(awsrules.TypeSecurityGroupRule) {
		if strings.Contains(r.Name, "otlp") && r.Name != "flock-sg-gateway-to-otlp" {
			t.Errorf("a rule for the collector besides the gateway's: %s", r.Name)
		}
	}

	tls := awsGatewayStack(t, capture.Config{"flock:otlp": `{"endpoint": "https://collector.example.com"}`})
	if _, ok := tls.Get(awsrules.TypeSecurityGroupRule, "flock-sg-gateway-to-otlp"); ok {
		t.Error("a second rule for 443, which the gateway already has")
	}
	off := awsGatewayStack(t, nil)
	if _, ok := off.Get(awsrules.TypeSecurityGroupRule, "flock-sg-gateway-to-otlp"); ok {
		t.Error("an egress rule for spans without flock:otlp.endpoint")
	}
	if td := awsGet(t, off, awsrules.TypeTaskDefinition, "flock-services-task"); strings.Contains(td.String("containerDefinitions"), protocol.EnvServicesSpans) {
		t.Error("the services derive spans without flock:otlp.endpoint")
	}
	if _, err := capture.RunAWS(capture.Config{"flock:otlp": `{"endpoint": "http://collector:4318"}`}); err == nil || !strings.Contains(err.Error(), "flock:otlp.endpoint: needs a model gateway") {
		t.Errorf("span export without a gateway: %v", err)
	}
}
