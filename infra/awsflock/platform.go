package awsflock

import (
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/servicediscovery"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ECSServicePrincipal is the service ECS's service-linked role is for.
const ECSServicePrincipal = "ecs.amazonaws.com"

// platform declares the cluster and the Cloud Map namespace the bus nodes
// register in, and (when asked) ECS's service-linked role.
func (d *declarer) platform() error {
	if d.args.CreateServiceLinkedRole {
		// ECS creates AWSServiceRoleForECS itself when it first needs it, but
		// not always in time: the first service of a fresh account can fail
		// with "Unable to assume the service linked role". Declared, every
		// service waits for it (d.ready). It takes no name (AWS fixes it),
		// description or tags: the defaults are AWS's.
		slr, err := iam.NewServiceLinkedRole(d.ctx, d.n("ecs-service-linked-role"), &iam.ServiceLinkedRoleArgs{
			AwsServiceName: pulumi.String(ECSServicePrincipal),
		}, d.parent)
		if err != nil {
			return fmt.Errorf("ecs service-linked role: %w", err)
		}
		d.ready = append(d.ready, slr)
	}
	var err error
	d.cluster, err = ecs.NewCluster(d.ctx, d.n("cluster"), &ecs.ClusterArgs{
		Settings: ecs.ClusterSettingArray{ecs.ClusterSettingArgs{Name: pulumi.String("containerInsights"), Value: pulumi.String("enabled")}},
		Tags:     d.tags("cluster", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	d.namespace, err = servicediscovery.NewPrivateDnsNamespace(d.ctx, d.n("namespace"), &servicediscovery.PrivateDnsNamespaceArgs{
		Name: pulumi.String(d.args.Namespace), Vpc: d.vpcID,
		Description: pulumi.String("AI Flock " + d.name + ": the bus is bus." + d.args.Namespace),
		Tags:        d.tags("discovery", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	return nil
}
