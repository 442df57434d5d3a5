package stacks_test

import (
	"reflect"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The flock's services (the board) on aws (TestAWSStackInvariants): one
// service of one task, /flock-services from the bus image, hardened like
// every task, as their own UID, their seed from a secret of their own,
// every bus node in FLOCK_SERVICES_NATS_URL, a security group that admits
// nothing, started after the bus.
func checkAWSFlockServices(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	n := len(ids)
	m, err := flock.Config{Target: string(flock.TargetAWS), Name: "flock", AgentCount: &n}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	uid, limits := m.Services.UID, m.Services.Limits
	if limits != flock.DefaultServicesLimits {
		t.Fatalf("the model's services limits %+v, want the defaults", limits)
	}
	td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-services-task")
	c := checkAWSHardenedTask(t, td, uid, limits)
	if td.String("family") != "aws-flock-services" {
		t.Errorf("services: family %q", td.String("family"))
	}
	others := map[int]string{flock.DefaultUIDBase: "the bus", flock.DefaultUIDBase - 1: "the operator"}
	for _, id := range ids {
		others[awsUID(id)] = id
	}
	if who, ok := others[uid]; ok {
		t.Errorf("services: UID %d is %s's", uid, who)
	}
	if c.Name != awsflock.RoleServices || c.Image != capture.MockRegistry()+"/flock-images@"+capture.MockDigest("flock-bus-image") {
		t.Errorf("services: container %q runs %q, want %q from the pushed bus image", c.Name, c.Image, awsflock.RoleServices)
	}
	if !reflect.DeepEqual(c.EntryPoint, []string{"/flock-services"}) || !reflect.DeepEqual(c.Command, []string{"run"}) {
		t.Errorf("services: entryPoint %q command %q, want /flock-services run", c.EntryPoint, c.Command)
	}
	wantEnv := []awsflock.KeyValue{
		{Name: protocol.EnvServicesEMF, Value: protocol.EMFFlock}, {Name: protocol.EnvServicesFlock, Value: "aws-flock"},
		{Name: protocol.EnvServicesNATSURL, Value: b.url()},
	}
	if !reflect.DeepEqual(c.Environment, wantEnv) {
		t.Errorf("services: environment %+v, want %+v (the metrics at the flock's level, every bus node)", c.Environment, wantEnv)
	}
	// Their seed: a secret of their own, a Pulumi secret, injected at start.
	secret := awsGet(t, s, awsrules.TypeSecret, "flock-services-nkey")
	if !reflect.DeepEqual(c.Secrets, []awsflock.Secret{{Name: protocol.EnvServicesNkey, ValueFrom: secret.MockARN()}}) {
		t.Errorf("services: secrets %+v, want their seed as %s", c.Secrets, protocol.EnvServicesNkey)
	}
	v := awsGet(t, s, awsrules.TypeSecretVersion, "flock-services-nkey")
	key, _ := credentials.Derive([]byte(capture.TestSecret), protocol.ServicesUser)
	if !v.Inputs["secretString"].IsSecret() || v.String("secretString") != key.Seed || v.String("secretId") != capture.MockID("flock-services-nkey") {
		t.Errorf("services: the secret's value is not the services user's seed held as a Pulumi secret")
	}
	// Listening on nothing, mounting nothing: no port, no EFS volume.
	if len(c.PortMappings) != 0 {
		t.Errorf("services: declares ports %v", c.PortMappings)
	}
	for _, vol := range list(td, "volumes") {
		if asMap(vol)["efsVolumeConfiguration"] != nil {
			t.Errorf("services: mounts EFS %v", vol)
		}
	}
	h := c.HealthCheck
	if h == nil || !reflect.DeepEqual(h.Command, []string{"CMD", "/flock-services", "health"}) ||
		h.Interval < 5 || h.Interval > 300 || h.Timeout < 2 || h.Timeout > 60 || h.Retries < 1 || h.Retries > 10 || h.StartPeriod < 0 || h.StartPeriod > 300 {
		t.Errorf("services: health check %+v, want /flock-services health in ECS's ranges", h)
	}
	lg := awsGet(t, s, awsrules.TypeLogGroup, "flock-services-logs")
	if lg.String("name") != "/ai-flock/aws/flock/services" || c.LogConfiguration.Options["awslogs-group"] != lg.String("name") ||
		c.LogConfiguration.Options["awslogs-stream-prefix"] != awsflock.RoleServices {
		t.Errorf("services: logs %+v to %q", c.LogConfiguration.Options, lg.String("name"))
	}

	// The service: one task, private subnets, its own group, no Cloud Map
	// name, after the bus's last node, rolled by a new seed.
	svc := awsGet(t, s, awsrules.TypeService, "flock-services")
	nc := obj(svc, "networkConfiguration")
	if num(svc, "desiredCount") != 1 || svc.String("launchType") != "FARGATE" || svc.String("taskDefinition") != td.MockARN() ||
		num(svc, "deploymentMaximumPercent") != 100 || num(svc, "deploymentMinimumHealthyPercent") != 0 || boolean(svc, "enableExecuteCommand") {
		t.Errorf("services: %v: want one Fargate task, never two at once, no exec", svc.Inputs)
	}
	if nc["assignPublicIp"] != false || !reflect.DeepEqual(nc["securityGroups"], []any{capture.MockID("flock-services-sg")}) ||
		!reflect.DeepEqual(nc["subnets"], []any{capture.MockID("flock-private-1"), capture.MockID("flock-private-2")}) {
		t.Errorf("services: network %v: want the private subnets, their own group, no public IP", nc)
	}
	if obj(svc, "serviceRegistries") != nil {
		t.Errorf("services: registered in Cloud Map, yet they listen on nothing")
	}
	for _, dep := range []string{"flock-" + b.keys()[len(b.keys())-1], "flock-services-exec-policy", "flock-services-nkey", "flock-endpoint-secretsmanager"} {
		if !dependsOn(svc, capture.Resource{Name: dep}) {
			t.Errorf("services: the service does not wait for %s", dep)
		}
	}
	if obj(svc, "triggers")["credentials"] == nil {
		t.Errorf("services: no trigger rolls them when their seed changes: %v", obj(svc, "triggers"))
	}
	// Their group: tagged theirs, and no rule admits anything into it.
	sg := awsGet(t, s, awsrules.TypeSecurityGroup, "flock-services-sg")
	if obj(sg, "tags")[protocol.LabelRole] != awsflock.RoleServices || len(list(sg, "ingress")) != 0 {
		t.Errorf("services: group %v: want role %s, no ingress", sg.Inputs, awsflock.RoleServices)
	}
	for _, r := range s.ByType(awsrules.TypeSecurityGroupRule) {
		if r.String("type") == "ingress" && r.String("securityGroupId") == capture.MockID("flock-services-sg") {
			t.Errorf("services: %s admits into their group", r.Name)
		}
	}
}
