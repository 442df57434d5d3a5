package stacks_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack's invariants (TestAWSStackInvariants, aws_test.go): EFS and its access points.

// 3. EFS: encrypted; a mount target per subnet behind the EFS group; a policy
// denying non-TLS access and mounts without an access point; access points
// per agent directory and log (its UID, 0700), common, and a single bus's
// store (a cluster's nodes keep theirs on task storage: no access point).
func checkAWSStorage(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	fs := awsGet(t, s, awsrules.TypeFileSystem, "flock-efs")
	if !boolean(fs, "encrypted") {
		t.Error("the file system is not encrypted at rest")
	}
	mts := s.ByType(awsrules.TypeMountTarget)
	if len(mts) != 2 {
		t.Errorf("%d mount targets, want one per private subnet", len(mts))
	}
	for _, mt := range mts {
		if !reflect.DeepEqual(list(mt, "securityGroups"), []any{capture.MockID("flock-efs-sg")}) {
			t.Errorf("%s: security groups %v", mt.Name, list(mt, "securityGroups"))
		}
	}
	fsARN := fs.MockARN()
	p := awsPolicy(t, awsGet(t, s, awsrules.TypeFileSystemPolicy, "flock-efs-policy"), "policy")
	var tls, noAP bool
	for _, st := range p.Statement {
		if st.Effect != "Deny" {
			t.Errorf("file system policy allows %v: it must only deny (task roles grant)", st.Action)
		}
		if !reflect.DeepEqual(st.Resource, []string{fsARN}) {
			t.Errorf("file system policy statement %s on %v, want %s", st.Sid, st.Resource, fsARN)
		}
		if reflect.DeepEqual(st.Condition, map[string]map[string]any{"Bool": {"aws:SecureTransport": "false"}}) && reflect.DeepEqual(st.Action, []string{"*"}) {
			tls = true
		}
		if reflect.DeepEqual(st.Condition, map[string]map[string]any{"Null": {awsflock.APCondition: "true"}}) && slices.Contains(awsAnyList(st.Action), "elasticfilesystem:ClientMount") {
			noAP = true
		}
	}
	if !tls || !noAP {
		t.Errorf("file system policy %+v: want a deny without TLS (%v) and a deny of mounts without an access point (%v)", p, tls, noAP)
	}

	type awsAPWant struct {
		path       string
		owner, uid int
		perms      string
	}
	op := awsflock.OperatorUID(flock.Model{Bus: flock.Bus{UID: flock.DefaultUIDBase}})
	want := map[string]awsAPWant{
		"flock-common-ap":        {"/common", op, awsflock.NobodyUID, "0755"},
		"flock-common-writer-ap": {"/common", op, op, "0755"},
	}
	if b.nodes == 1 {
		want["flock-bus-ap"] = awsAPWant{"/bus", flock.DefaultUIDBase, flock.DefaultUIDBase, "0700"}
	}
	for _, id := range ids {
		want["flock-"+id+"-dir-ap"] = awsAPWant{"/agents/" + id, awsUID(id), awsUID(id), "0700"}
		want["flock-"+id+"-log-ap"] = awsAPWant{"/logs/" + id, awsUID(id), awsUID(id), "0700"}
	}
	aps := s.ByType(awsrules.TypeAccessPoint)
	if len(aps) != len(want) {
		t.Errorf("%d access points, want %d", len(aps), len(want))
	}
	paths := map[string]string{}
	for _, ap := range aps {
		w, ok := want[ap.Name]
		if !ok {
			t.Errorf("unexpected access point %s", ap.Name)
			continue
		}
		root := obj(ap, "rootDirectory")
		ci := asMap(root["creationInfo"])
		if root["path"] != w.path || ci["ownerUid"] != float64(w.owner) || ci["ownerGid"] != float64(w.owner) || ci["permissions"] != w.perms {
			t.Errorf("%s: root %v, want %s owned by %d mode %s", ap.Name, root, w.path, w.owner, w.perms)
		}
		if pu := obj(ap, "posixUser"); pu["uid"] != float64(w.uid) || pu["gid"] != float64(w.uid) {
			t.Errorf("%s: posix user %v, want %d:%d", ap.Name, pu, w.uid, w.uid)
		}
		if ap.String("fileSystemId") != capture.MockID("flock-efs") {
			t.Errorf("%s: on %s", ap.Name, ap.String("fileSystemId"))
		}
		if other, dup := paths[w.path]; dup && w.path != "/common" {
			t.Errorf("%s and %s share %s", ap.Name, other, w.path)
		}
		paths[w.path] = ap.Name
	}
}

// Each agent's access points are mounted by its task alone; an access point
// several tasks mount (common) is read-only in all of them.
func checkAWSAccessPointUse(t *testing.T, s *capture.Stack, ids []string) {
	users := map[string][]string{} // access point ID -> "task mode"
	for _, td := range s.ByType(awsrules.TypeTaskDefinition) {
		c := awsContainer(t, td)
		for _, v := range list(td, "volumes") {
			vm := v.(map[string]any)
			ap, _ := asMap(asMap(vm["efsVolumeConfiguration"])["authorizationConfig"])["accessPointId"].(string)
			if ap == "" {
				continue
			}
			for _, m := range c.MountPoints {
				if m.SourceVolume == vm["name"] {
					mode := "rw"
					if m.ReadOnly {
						mode = "ro"
					}
					users[ap] = append(users[ap], td.Name+" "+mode)
				}
			}
		}
	}
	for _, id := range ids {
		for _, ap := range []string{"dir-ap", "log-ap"} {
			if got := users[capture.MockID("flock-"+id+"-"+ap)]; !reflect.DeepEqual(got, []string{"flock-" + id + "-task rw"}) {
				t.Errorf("%s's %s is mounted by %v, want its task alone", id, ap, got)
			}
		}
	}
	for ap, us := range users {
		if len(us) < 2 {
			continue
		}
		for _, u := range us {
			if strings.HasSuffix(u, " rw") {
				t.Errorf("%s, shared by %d tasks, is mounted read-write by %s", ap, len(us), u)
			}
		}
	}
	if got := len(users[capture.MockID("flock-common-ap")]); got != len(ids) {
		t.Errorf("common is mounted by %d tasks, want every agent (%d)", got, len(ids))
	}
}
