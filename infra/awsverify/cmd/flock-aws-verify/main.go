// flock-aws-verify waits for an ECS service's rollout of one task
// definition and fails, naming the service and its deployment's state, when
// ECS rolled it back, the rollout FAILED, or the new tasks never started in
// time. The aws stack runs it after each change of a service (a command
// step on the deploying machine, with the deployer's AWS credentials), so
// that `pulumi up` fails instead of reporting a rollback as success.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/ai-flock/ai-flock/infra/awsverify"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flock-aws-verify:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("flock-aws-verify", flag.ContinueOnError)
	region := fs.String("region", "", "the service's region")
	cluster := fs.String("cluster", "", "the service's cluster (name or ARN)")
	service := fs.String("service", "", "the service's name")
	taskDef := fs.String("task-definition", "", "the task definition ARN just applied")
	timeout := fs.Duration("timeout", 15*time.Minute, "how long the new tasks may take to reach a steady state")
	every := fs.Duration("interval", 10*time.Second, "how often to ask")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cluster == "" || *service == "" || *taskDef == "" {
		return errors.New("--cluster, --service and --task-definition are required")
	}
	var opts []func(*config.LoadOptions) error
	if *region != "" {
		opts = append(opts, config.WithRegion(*region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	client := ecs.NewFromConfig(cfg)
	start := time.Now()
	for {
		resp, err := client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: cluster, Services: []string{*service}})
		if err != nil {
			return fmt.Errorf("service %s: DescribeServices: %w", *service, err)
		}
		if len(resp.Services) == 0 {
			reason := "not found"
			if len(resp.Failures) > 0 {
				reason = aws.ToString(resp.Failures[0].Reason)
			}
			return fmt.Errorf("service %s in %s: %s", *service, *cluster, reason)
		}
		s := fromECS(resp.Services[0])
		done, err := awsverify.Check(s, *taskDef)
		if err != nil {
			return err
		}
		if done {
			fmt.Fprintf(out, "service %s: rolled out %s (COMPLETED) in %s\n", *service, *taskDef, time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > *timeout {
			return awsverify.Stalled(s, *taskDef, time.Since(start))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*every):
		}
	}
}

// fromECS is the SDK's service as the checker reads it.
func fromECS(s types.Service) awsverify.Service {
	out := awsverify.Service{
		ServiceName: aws.ToString(s.ServiceName), Status: aws.ToString(s.Status),
		TaskDefinition: aws.ToString(s.TaskDefinition), DesiredCount: s.DesiredCount, RunningCount: s.RunningCount,
	}
	for _, d := range s.Deployments {
		out.Deployments = append(out.Deployments, awsverify.Deployment{
			ID: aws.ToString(d.Id), Status: aws.ToString(d.Status), TaskDefinition: aws.ToString(d.TaskDefinition),
			DesiredCount: d.DesiredCount, RunningCount: d.RunningCount, PendingCount: d.PendingCount, FailedTasks: d.FailedTasks,
			RolloutState: string(d.RolloutState), RolloutStateReason: aws.ToString(d.RolloutStateReason),
		})
	}
	for _, e := range s.Events {
		out.Events = append(out.Events, awsverify.Event{CreatedAt: aws.ToTime(e.CreatedAt), Message: aws.ToString(e.Message)})
	}
	return out
}
