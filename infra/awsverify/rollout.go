// Package awsverify tells a finished ECS rollout from one that rolled back
// or never started. ECS calls a service stable when it has one deployment
// whose running count is its desired count, which is also true after the
// deployment circuit breaker rolled a failed revision back to the old one;
// so waiting for a steady state (what the provider does) cannot catch it.
// A rollout is read from DescribeServices instead: the service's PRIMARY
// deployment must run the task definition just applied and say COMPLETED.
package awsverify

import (
	"fmt"
	"strings"
	"time"
)

// Service is what DescribeServices says of one service, the fields a
// rollout is judged by (the API's own names, as its JSON spells them).
type Service struct {
	ServiceName    string       `json:"serviceName"`
	Status         string       `json:"status"`
	TaskDefinition string       `json:"taskDefinition"`
	DesiredCount   int32        `json:"desiredCount"`
	RunningCount   int32        `json:"runningCount"`
	Deployments    []Deployment `json:"deployments"`
	Events         []Event      `json:"events"`
}

// Deployment is one of a service's deployments.
type Deployment struct {
	ID                 string `json:"id"`
	Status             string `json:"status"` // PRIMARY, ACTIVE or INACTIVE
	TaskDefinition     string `json:"taskDefinition"`
	DesiredCount       int32  `json:"desiredCount"`
	RunningCount       int32  `json:"runningCount"`
	PendingCount       int32  `json:"pendingCount"`
	FailedTasks        int32  `json:"failedTasks"`
	RolloutState       string `json:"rolloutState"` // IN_PROGRESS, COMPLETED or FAILED
	RolloutStateReason string `json:"rolloutStateReason"`
}

// Event is one of the service's events, newest first.
type Event struct {
	CreatedAt time.Time `json:"createdAt"`
	Message   string    `json:"message"`
}

// Failed is a rollout that will not complete: rolled back, failed, or its
// service gone.
type Failed struct {
	Service, State, Detail string
}

func (f *Failed) Error() string {
	return fmt.Sprintf("service %s: %s: %s", f.Service, f.State, f.Detail)
}

// Check judges s against the task definition just applied (its ARN): done
// when the PRIMARY deployment runs it and has COMPLETED; a *Failed when ECS
// rolled it back, the rollout FAILED or the service is no longer ACTIVE;
// neither while the rollout goes on.
func Check(s Service, want string) (done bool, err error) {
	if s.Status != "" && s.Status != "ACTIVE" {
		return false, &Failed{s.ServiceName, "service " + s.Status, "it is being deleted or was"}
	}
	var primary *Deployment
	for i := range s.Deployments {
		if s.Deployments[i].Status == "PRIMARY" {
			primary = &s.Deployments[i]
		}
	}
	if primary == nil {
		return false, nil // between deployments: ask again
	}
	if primary.TaskDefinition != want {
		// The circuit breaker made a new PRIMARY deployment of the old
		// revision; the failed one is left ACTIVE or gone.
		detail := fmt.Sprintf("its primary deployment %s runs %s, not %s", primary.ID, shortARN(primary.TaskDefinition), shortARN(want))
		for _, d := range s.Deployments {
			if d.TaskDefinition == want && d.RolloutState == "FAILED" {
				detail += fmt.Sprintf("; deployment %s of %s FAILED: %s", d.ID, shortARN(want), d.RolloutStateReason)
			}
		}
		return false, &Failed{s.ServiceName, "rolled back", detail + lastEvent(s)}
	}
	switch primary.RolloutState {
	case "COMPLETED":
		return true, nil
	case "FAILED":
		return false, &Failed{s.ServiceName, "rollout FAILED", fmt.Sprintf("deployment %s of %s: %s (running %d of %d, %d tasks failed)%s",
			primary.ID, shortARN(want), primary.RolloutStateReason, primary.RunningCount, primary.DesiredCount, primary.FailedTasks, lastEvent(s))}
	}
	return false, nil
}

// Stalled is what to say when the rollout still goes on at the deadline:
// the new tasks never reached a steady state.
func Stalled(s Service, want string, waited time.Duration) error {
	for _, d := range s.Deployments {
		if d.Status == "PRIMARY" {
			return &Failed{s.ServiceName, "not started", fmt.Sprintf("deployment %s of %s still %s after %s: running %d of %d, %d pending, %d tasks failed (%s)%s",
				d.ID, shortARN(want), d.RolloutState, waited.Round(time.Second), d.RunningCount, d.DesiredCount, d.PendingCount, d.FailedTasks, d.RolloutStateReason, lastEvent(s))}
		}
	}
	return &Failed{s.ServiceName, "not started", fmt.Sprintf("no primary deployment after %s%s", waited.Round(time.Second), lastEvent(s))}
}

func lastEvent(s Service) string {
	if len(s.Events) == 0 {
		return ""
	}
	return "; last event: " + s.Events[0].Message
}

// shortARN is a task definition's family:revision.
func shortARN(arn string) string {
	if i := strings.LastIndex(arn, "/"); i >= 0 {
		return arn[i+1:]
	}
	return arn
}
