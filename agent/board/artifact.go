package board

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// metaBy is the object metadata key naming the agent that put an artifact.
const metaBy = "flock-by"

// checkArtifactName applies the artifact reference rule to a put or get.
func checkArtifactName(op string, req protocol.BoardRequest) error {
	if err := needTask(op, req); err != nil {
		return err
	}
	if req.Name == "" {
		return refuse(protocol.BoardErrInvalid, "%s: name is required", op)
	}
	if err := protocol.CheckBoardArtifactName("name", req.Name); err != nil {
		return refuse(protocol.BoardErrInvalid, "%s: %v", op, err)
	}
	return nil
}

// put stores an artifact under a task the caller holds, within the
// caller's share of the store (artifact_quota.go: every artifact charged
// what it costs the store, at most protocol.ArtifactQuotaObjects of them;
// one it replaces counts once).
func (s *Service) put(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if err := checkArtifactName(protocol.BoardOpPut, req); err != nil {
		return nil, err
	}
	if s.obj == nil {
		return nil, refuse(protocol.BoardErrInternal, "this bus keeps no artifact store (%s)", protocol.ArtifactBucket)
	}
	if len(req.Data) > protocol.ArtifactBytes {
		return nil, refuse(protocol.BoardErrLimit, "artifact %s: %d bytes, over the board's %d-byte limit of one artifact", req.Name, len(req.Data), protocol.ArtifactBytes)
	}
	key := protocol.BoardKey(req.Plan, req.Task)
	t, ok, err := s.st.lookup(ctx, key)
	if err == nil && ok && (t.Status != protocol.BoardClaimed || t.Holder != caller) {
		t, ok, err = s.st.fetch(ctx, key) // the view may lag a claim made on another node
	}
	switch {
	case err != nil:
		return nil, err
	case !ok || !visible(s.viewer(caller), t):
		return nil, noTask(key)
	case t.Status != protocol.BoardClaimed || t.Holder != caller:
		return nil, refuse(protocol.BoardErrNotHolder, "task %s is not held by %s: an artifact is put only under a task its putter holds", key, caller)
	}
	unlock := s.lockCaller(caller)
	defer unlock()
	name := protocol.ArtifactObject(req.Plan, req.Task, req.Name)
	if err := s.checkQuota(ctx, caller, req.Name, name, len(req.Data)); err != nil {
		return nil, err
	}
	info, err := s.obj.Put(ctx, jetstream.ObjectMeta{Name: name, Metadata: map[string]string{metaBy: caller}}, bytes.NewReader(req.Data))
	if err != nil {
		return nil, refuse(protocol.BoardErrInternal, "artifact %s not stored: %v", req.Name, err)
	}
	s.log.Info("board: artifact put", "task", key, "name", req.Name, "by", caller, "bytes", len(req.Data))
	return &protocol.BoardReply{Artifact: artifactOf(req, info)}, nil
}

// get returns an artifact to the operator, to the agent that put it, and
// to an agent holding a task that needs the artifact's task (the context a
// claim carries) once that task is done, by the owner of its ID, and the
// artifact is its holder's (not one a holder before it left): never to
// anyone else, who is told there is no such artifact.
func (s *Service) get(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if err := checkArtifactName(protocol.BoardOpGet, req); err != nil {
		return nil, err
	}
	if s.obj == nil {
		return nil, refuse(protocol.BoardErrInternal, "this bus keeps no artifact store (%s)", protocol.ArtifactBucket)
	}
	name := protocol.ArtifactObject(req.Plan, req.Task, req.Name)
	missing := refuse(protocol.BoardErrNotFound, "no artifact %s of task %s", req.Name, protocol.BoardKey(req.Plan, req.Task))
	info, err := s.obj.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, missing
	}
	if err != nil {
		return nil, refuse(protocol.BoardErrInternal, "artifact %s: %v", req.Name, err)
	}
	if caller != protocol.OperatorUser && info.Metadata[metaBy] != caller && !s.passesOn(caller, req.Plan, req.Task, info.Metadata[metaBy]) {
		return nil, missing
	}
	data, err := s.obj.GetBytes(ctx, name)
	if err != nil {
		return nil, refuse(protocol.BoardErrInternal, "artifact %s: %v", req.Name, err)
	}
	return &protocol.BoardReply{Artifact: artifactOf(req, info), Data: data}, nil
}

// passesOn reports whether an artifact of plan's task, put by by, reaches
// caller as a dependent: caller holds a task of plan that needs task, and
// task is done, by its holder, who put the artifact, and was created by the
// owner of its ID (so no task an agent made under the plan's ID, from
// before namespaces, passes its artifacts on as the plan's).
func (s *Service) passesOn(caller, plan, task, by string) bool {
	dep, ok := s.st.get(protocol.BoardKey(plan, task))
	if !ok || dep.Status != protocol.BoardDone || !dep.ByOwner() || dep.Holder != by {
		return false
	}
	return len(s.st.needing(dep.Key(), func(t protocol.BoardTask) bool {
		return t.Status == protocol.BoardClaimed && t.Holder == caller
	})) > 0
}

// removeArtifacts deletes the artifacts of plan's tasks (the plan left the
// board).
func (s *Service) removeArtifacts(ctx context.Context, plan string) {
	if s.obj == nil {
		return
	}
	list, err := s.obj.List(ctx)
	if err != nil {
		return
	}
	for _, o := range list {
		if strings.HasPrefix(o.Name, plan+"/") {
			if err := s.obj.Delete(ctx, o.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
				s.log.Warn("board: artifact of a removed plan not deleted", "artifact", o.Name, "err", err)
				continue
			}
			if err := s.purgeMarker(ctx, o.Name); err != nil {
				s.log.Warn("board: the marker of a deleted artifact not purged", "artifact", o.Name, "err", err)
			}
		}
	}
}

func artifactOf(req protocol.BoardRequest, info *jetstream.ObjectInfo) *protocol.BoardArtifact {
	return &protocol.BoardArtifact{Plan: req.Plan, Task: req.Task, Name: req.Name, Size: int(info.Size), By: info.Metadata[metaBy], Digest: info.Digest}
}
