package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// refuse is a refusal: the reply's Error and Code; nothing changed.
func refuse(code, format string, args ...any) error {
	return &protocol.BoardError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Which ops each side may ask for.
var (
	agentOps    = []string{protocol.BoardOpList, protocol.BoardOpShow, protocol.BoardOpClaim, protocol.BoardOpRenew, protocol.BoardOpRenewAll, protocol.BoardOpAbandon, protocol.BoardOpComplete, protocol.BoardOpFail, protocol.BoardOpRelease, protocol.BoardOpAdd, protocol.BoardOpPut, protocol.BoardOpGet}
	operatorOps = []string{protocol.BoardOpApply, protocol.BoardOpDryRun, protocol.BoardOpList, protocol.BoardOpShow, protocol.BoardOpCancel, protocol.BoardOpRetry, protocol.BoardOpRemove, protocol.BoardOpGet}
)

// replyAllowed: the service answers only into the caller's own reply
// inboxes. Its connection may publish anywhere, and a request's reply
// subject is the requester's to choose: an agent asking with the reply
// subject tasks.agent-2 would otherwise have the answer stored as a task
// for agent-2, in the bus's name.
func replyAllowed(caller, reply string) bool {
	token := caller
	if caller == protocol.OperatorUser {
		token = protocol.OperatorInboxToken
	}
	return strings.HasPrefix(reply, protocol.InboxPrefix(token)+".")
}

// handle answers one request. The caller is the subject's (the bus lets an
// agent publish only on its own request subjects), never the body's.
func (s *Service) handle(m *nats.Msg) {
	caller, op, ok := protocol.BoardCaller(m.Subject)
	if ok && caller == protocol.OperatorUser && m.Subject != protocol.BoardOperatorSubject(op) {
		ok = false // board.agent.operator.<op>: no agent is named so, and none is the operator
	}
	if !ok {
		s.log.Warn("board: request on a subject that names no caller", "subject", m.Subject)
		return
	}
	if !replyAllowed(caller, m.Reply) {
		s.log.Warn("board: request not answered: its reply subject is not the caller's inbox", "caller", caller, "op", op, "reply", m.Reply)
		return
	}
	s.respond(m, caller, op, s.serve(caller, op, m.Data))
}

// respond sends rep to the reply subject of m, which must be the caller's
// own reply inbox (replyAllowed).
func (s *Service) respond(m *nats.Msg, caller, op string, rep *protocol.BoardReply) {
	if !replyAllowed(caller, m.Reply) {
		return
	}
	rep.V = protocol.Version
	body, err := json.Marshal(rep)
	if err != nil {
		body, _ = json.Marshal(protocol.BoardReply{V: protocol.Version, Code: protocol.BoardErrInternal, Error: "reply not encoded: " + err.Error()})
	}
	if err := m.Respond(body); err != nil {
		s.log.Warn("board: reply not sent", "caller", caller, "op", op, "err", err)
	}
}

// serve decodes the request and does the op; a panic is an internal error
// of this request, not the end of the service.
func (s *Service) serve(caller, op string, data []byte) (rep *protocol.BoardReply) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("board: request panicked", "caller", caller, "op", op, "panic", r, "stack", string(debug.Stack()))
			rep = &protocol.BoardReply{Code: protocol.BoardErrInternal, Error: fmt.Sprintf("the board failed on this request: %v", r)}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	rep, err := s.do(ctx, caller, op, data)
	if err != nil {
		var be *protocol.BoardError
		if !errors.As(err, &be) {
			s.log.Warn("board: request failed", "caller", caller, "op", op, "err", err)
			be = &protocol.BoardError{Code: protocol.BoardErrInternal, Msg: err.Error()}
		}
		if rep == nil {
			rep = &protocol.BoardReply{}
		}
		rep.Error, rep.Code = be.Msg, be.Code
		if be.Code != protocol.BoardErrInternal {
			s.log.Debug("board: refused", "caller", caller, "op", op, "code", be.Code, "why", be.Msg)
		}
	}
	return rep
}

func (s *Service) do(ctx context.Context, caller, op string, data []byte) (*protocol.BoardReply, error) {
	operator := caller == protocol.OperatorUser
	ops := agentOps
	if operator {
		ops = operatorOps
	}
	if !slices.Contains(agentOps, op) && !slices.Contains(operatorOps, op) {
		return nil, refuse(protocol.BoardErrInvalid, "unknown op %q (the board's ops: %s)", clip(op), strings.Join(ops, ", "))
	}
	if !slices.Contains(ops, op) {
		if operator {
			return nil, refuse(protocol.BoardErrForbidden, "the operator does not %s: only agents take and work tasks", op)
		}
		return nil, refuse(protocol.BoardErrForbidden, "only the operator may %s (an agent may: %s)", op, strings.Join(ops, ", "))
	}
	req, err := decodeRequest(op, data)
	if err != nil {
		return nil, err
	}
	if err := s.st.waitLoaded(ctx); err != nil {
		return nil, err
	}
	switch op {
	case protocol.BoardOpList:
		return s.list(caller, req)
	case protocol.BoardOpShow:
		return s.show(ctx, caller, req)
	case protocol.BoardOpClaim:
		return s.claim(ctx, caller, req)
	case protocol.BoardOpRenew, protocol.BoardOpComplete, protocol.BoardOpFail, protocol.BoardOpRelease:
		return s.holderOp(ctx, caller, op, req)
	case protocol.BoardOpRenewAll:
		return s.renewAll(ctx, caller, req)
	case protocol.BoardOpAbandon:
		return s.abandon(ctx, caller)
	case protocol.BoardOpAdd:
		return s.add(ctx, caller, req)
	case protocol.BoardOpApply:
		return s.apply(ctx, req, false)
	case protocol.BoardOpDryRun:
		return s.apply(ctx, req, true)
	case protocol.BoardOpCancel:
		return s.cancelTask(ctx, req)
	case protocol.BoardOpRetry:
		return s.retry(ctx, req)
	case protocol.BoardOpRemove:
		return s.removePlan(ctx, req)
	case protocol.BoardOpPut:
		return s.put(ctx, caller, req)
	case protocol.BoardOpGet:
		return s.get(ctx, caller, req)
	}
	return nil, refuse(protocol.BoardErrInternal, "op %q has no handler", op)
}

// decodeRequest reads a request body: bounded (apply's only by the bus's
// max payload), JSON, of a version this service reads, and with the
// identifiers it names well-formed.
func decodeRequest(op string, data []byte) (protocol.BoardRequest, error) {
	var req protocol.BoardRequest
	limit := maxBodyBytes
	if op == protocol.BoardOpPut {
		limit = protocol.ArtifactBytes*4/3 + maxBodyBytes // the artifact, base64
	}
	if op != protocol.BoardOpApply && op != protocol.BoardOpDryRun && len(data) > limit {
		return req, refuse(protocol.BoardErrInvalid, "body: %d bytes, over the %d-byte limit of a %s request", len(data), limit, op)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return req, refuse(protocol.BoardErrInvalid, "body: malformed JSON: %s", jsonProblem(err))
	}
	switch {
	case req.V < 0:
		return req, refuse(protocol.BoardErrInvalid, "v: must be %d (got %d)", protocol.Version, req.V)
	case req.V > protocol.Version:
		return req, refuse(protocol.BoardErrInvalid, "v: unsupported version %d: this board reads version %d", req.V, protocol.Version)
	}
	if req.Plan != "" && !protocol.ValidBoardID(req.Plan) {
		return req, refuse(protocol.BoardErrInvalid, "plan: must match %s (got %q)", protocol.BoardIDRule, clip(req.Plan))
	}
	if req.Task != "" && !protocol.ValidBoardTaskRef(req.Task) {
		return req, refuse(protocol.BoardErrInvalid, "task: must match %s (a plan's task, or an agent's <agent>/<id>; got %q)", protocol.BoardTaskRefRule, clip(req.Task))
	}
	if req.Limit < 0 {
		return req, refuse(protocol.BoardErrInvalid, "limit: must be 0 (as many as fit) or more (got %d)", req.Limit)
	}
	if req.Kind != "" && req.Kind != protocol.BoardKindRun && req.Kind != protocol.BoardKindPrompt {
		return req, refuse(protocol.BoardErrInvalid, "kind: %q is neither %s nor %s", clip(req.Kind), protocol.BoardKindRun, protocol.BoardKindPrompt)
	}
	for i, st := range req.Status {
		if !protocol.ValidBoardStatus(st) {
			return req, refuse(protocol.BoardErrInvalid, "status[%d]: %q is not a task status", i, clip(st))
		}
	}
	if err := protocol.CheckBoardReason("reason", req.Reason); err != nil {
		return req, refuse(protocol.BoardErrInvalid, "%s", err)
	}
	if req.Result != nil {
		if err := req.Result.Validate("result"); err != nil {
			return req, refuse(protocol.BoardErrInvalid, "%s", err)
		}
	}
	return req, nil
}

// noTask is the refusal of a request about a task that does not exist, and
// of an agent's about one it may not see (visible): the same words and
// code for both, so that no refusal tells an agent what it may not see.
func noTask(key string) error { return refuse(protocol.BoardErrNotFound, "no task %s", key) }

// needTask refuses a request that does not name one task.
func needTask(op string, req protocol.BoardRequest) error {
	if req.Plan == "" || req.Task == "" {
		return refuse(protocol.BoardErrInvalid, "%s: plan and task are required", op)
	}
	return nil
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}
