package protocol

import (
	"fmt"
	"regexp"
	"time"
)

// The board's contract: the flock's shared task list. Tasks live in a
// JetStream key-value bucket (BoardBucket, key "<plan>.<task>") that only the
// board service writes; the service runs inside the bus (every node, one
// queue group: any node may answer, compare-and-set on the entry's revision
// makes each transition happen once). Agents ask it on request subjects of
// their own (board.agent.<id>.<op>: the bus lets only agent <id> publish
// there, so the service knows the caller without trusting the body); the
// operator asks on board.operator.<op>. Every transition is published on
// board.events.<plan>.<task>, and a task that became ready rings
// SubjectBoardReady (no body) so idle agents claim without polling.
//
// A task's ID says who alone may create it. A plan's tasks are the
// operator's, their IDs BoardIDRule's (no '/'); a subtask an agent adds
// lives in that agent's namespace, "<agent>/<id>" (BoardAgentTaskID), which
// no plan file can name. So no agent can take an ID the operator's plan
// uses or may use, nor one of another agent's: the key is
// "<plan>.<agent>/<id>" and the event subject board.events.<plan>.<agent>/<id>
// ('/' is a plain character of KV keys and subjects, so "*" still matches
// one task). Where a task's ID becomes a file or object name, its '/' is a
// '.' (BoardTaskFile): no ID has a dot, so the two stay apart.

// BoardBucket is the bucket's name; its stream is "KV_" + BoardBucket.
const BoardBucket = "FLOCK_BOARD"

// BoardStream is the bucket's stream.
const BoardStream = "KV_" + BoardBucket

// BoardBucketBytes is the store the bucket may use (one revision of each
// task; the bus's store is shared out with it, and 16 MiB, with the
// artifacts' 16 MiB, is what leaves the default store room for 500 agents'
// results and mailboxes), and BoardValueBytes the largest entry: a task at
// every bound.
const (
	BoardBucketBytes = 16 << 20
	BoardValueBytes  = 64 << 10
)

// Board subjects.
const (
	SubjectBoardAgentRequests = "board.agent.*.*"  // what the service answers for agents
	SubjectBoardOperator      = "board.operator.*" // what the service answers for the operator
	SubjectBoardEvents        = "board.events.>"   // every transition (the operator watches)
	SubjectBoardReady         = "board.ready"      // a task became ready (empty body)
	BoardQueueGroup           = "flock-board"      // every bus node serves; one answers each request
	boardAgentPrefix          = "board.agent."     // + <id> + "." + <op>
	boardOperatorPrefix       = "board.operator."  // + <op>
	boardEventsPrefix         = "board.events."    // + <plan> + "." + <task>
)

// BoardAgentSubject is where agent id asks the board to do op.
func BoardAgentSubject(id, op string) string { return boardAgentPrefix + id + "." + op }

// BoardAgentRequests is what agent id may publish on: its own request subjects.
func BoardAgentRequests(id string) string { return boardAgentPrefix + id + ".*" }

// BoardOperatorSubject is where the operator asks the board to do op.
func BoardOperatorSubject(op string) string { return boardOperatorPrefix + op }

// BoardEventSubject is where the service publishes a task's transition.
func BoardEventSubject(plan, task string) string { return boardEventsPrefix + plan + "." + task }

// BoardCaller reads a request subject: "operator", or the agent's ID, and the
// op. ok is false for a subject that is neither.
func BoardCaller(subject string) (caller, op string, ok bool) {
	if rest, found := cutPrefix(subject, boardOperatorPrefix); found {
		return OperatorUser, rest, rest != "" && !containsDot(rest)
	}
	if rest, found := cutPrefix(subject, boardAgentPrefix); found {
		for i := 0; i < len(rest); i++ {
			if rest[i] == '.' {
				id, op := rest[:i], rest[i+1:]
				return id, op, ValidAgentID(id) && op != "" && !containsDot(op)
			}
		}
	}
	return "", "", false
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

func containsDot(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return true
		}
	}
	return false
}

// Board operations. Agents: list, show, claim, renew, renew-all, abandon,
// complete, fail, release, add, put, get. The operator: apply, apply-dry-run, list, show,
// cancel, retry, remove, get.
const (
	BoardOpList  = "list"
	BoardOpShow  = "show"
	BoardOpClaim = "claim"
	BoardOpRenew = "renew"
	// BoardOpRenewAll renews every claim the caller holds (of Kind, when
	// the request names one): the runtime's proof that its agent is alive.
	// Its reply's Tasks are the claims renewed, Lease the lease.
	BoardOpRenewAll = "renew-all"
	// BoardOpAbandon gives back every claim the caller holds, the attempt
	// counted (out of attempts: failed): a runtime that starts holds
	// nothing, so what its agent held before it died is given back at
	// once, and a task that kills its agent does not run for ever.
	BoardOpAbandon  = "abandon"
	BoardOpComplete = "complete"
	BoardOpFail     = "fail"
	BoardOpRelease  = "release"
	BoardOpAdd      = "add"
	BoardOpApply    = "apply"
	BoardOpCancel   = "cancel"
	BoardOpRetry    = "retry"
	BoardOpRemove   = "remove" // the operator removes a finished plan's tasks
	// BoardOpDryRun is apply's checks and the changes it would make,
	// written nowhere: its request is apply's. An op of its own, not a
	// flag of apply's, so that a board service that does not know it
	// refuses it ("unknown op") rather than apply the plan for real.
	BoardOpDryRun = "apply-dry-run"
)

// Board task statuses.
const (
	BoardBlocked   = "blocked"   // waits for a dependency to be done
	BoardReady     = "ready"     // may be claimed
	BoardClaimed   = "claimed"   // held by an agent under a lease
	BoardDone      = "done"      // completed by its holder
	BoardFailed    = "failed"    // failed by its holder, or out of attempts
	BoardCancelled = "cancelled" // cancelled by the operator (or removed from its plan before it started)
)

// BoardRemovedReason is the reason of a task the board cancelled because a
// new version of its plan no longer has it: no longer part of the plan
// (applying a file that has it again revives it).
const BoardRemovedReason = "removed from the plan"

// Board kinds: what a task asks for.
const (
	BoardKindRun    = "run"    // a command the agent runtime runs itself
	BoardKindPrompt = "prompt" // text for an AI agent
)

// Board limits.
const (
	BoardIDRule            = `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$` // plan and task IDs: one key token each
	MaxBoardTitle          = 200
	MaxBoardPrompt         = 16 << 10
	MaxBoardRunArgs        = 64
	MaxBoardRunBytes       = 8 << 10 // the whole command, all arguments
	MaxBoardNeeds          = 64
	MaxBoardLabels         = 16
	MaxBoardLabel          = 63
	BoardLabelRule         = `^[a-z0-9][a-z0-9_-]{0,62}$` // a task's labels and an agent's (flock:agents[i].labels): at most MaxBoardLabel bytes
	MaxBoardAttempts       = 100
	DefaultBoardAttempts   = 3
	DefaultBoardTimeout    = 10 * time.Minute // how long a claim may last, renewed or not, and a run task's timeout
	DefaultBoardLease      = 30 * time.Second // how long a claim lasts unrenewed: its holder is silent then
	MaxBoardTimeout        = 24 * time.Hour
	MaxBoardSummary        = 4 << 10
	MaxBoardArtifacts      = 16
	MaxBoardArtifactRef    = 256
	MaxBoardReason         = 1 << 10
	MaxBoardPlanTasks      = 5000
	BoardAgentPageBytes    = 64 << 10 // the largest page of a list an agent is sent (the operator's: the bus's max payload)
	MaxBoardCursor         = 256      // a list's After
	DefaultBoardClaimLimit = 1        // tasks an agent holds at once
	DefaultBoardAddQuota   = 50       // subtasks an agent may add, all told
)

var boardIDPattern = regexp.MustCompile(BoardIDRule)

// ValidBoardID reports whether s may be a plan's ID, or the ID of a task of
// a plan file (the operator's).
func ValidBoardID(s string) bool { return boardIDPattern.MatchString(s) }

var boardLabelPattern = regexp.MustCompile(BoardLabelRule)

// ValidBoardLabel reports whether s may be a label: of a task (the board
// service checks) or of an agent (the stack's config checks).
func ValidBoardLabel(s string) bool { return boardLabelPattern.MatchString(s) }

// BoardKey is a task's key in the bucket.
func BoardKey(plan, task string) string { return plan + "." + task }

// BoardTaskSpec is a task as a plan file (or an agent adding a subtask) states
// it: everything the operator decides. Exactly one of Run and Prompt. ID is
// BoardIDRule's in a plan file and in an add (the board makes an agent's
// "<agent>/<id>"); a stored task's is its whole ID.
type BoardTaskSpec struct {
	ID       string   `json:"id" yaml:"id"`
	Title    string   `json:"title,omitempty" yaml:"title,omitempty"`
	Run      []string `json:"run,omitempty" yaml:"run,omitempty"`
	Prompt   string   `json:"prompt,omitempty" yaml:"prompt,omitempty"`
	Needs    []string `json:"needs,omitempty" yaml:"needs,omitempty"`
	Labels   []string `json:"labels,omitempty" yaml:"labels,omitempty"`     // an agent must have every one to claim it
	Assignee string   `json:"assignee,omitempty" yaml:"assignee,omitempty"` // only this agent may claim it
	Attempts int      `json:"attempts,omitempty" yaml:"attempts,omitempty"` // claims before it fails; DefaultBoardAttempts when 0
	Timeout  Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`   // how long a claim may last (a run task's timeout); DefaultBoardTimeout when 0
}

// Kind says whether the spec is a run or a prompt task.
func (s BoardTaskSpec) Kind() string {
	if len(s.Run) > 0 {
		return BoardKindRun
	}
	return BoardKindPrompt
}

// BoardPlan is a plan file: an ID (the file's name when it has none) and
// its tasks. Two plans' tasks never collide: a task's key is "<plan>.<id>".
type BoardPlan struct {
	Plan  string          `json:"plan,omitempty" yaml:"plan,omitempty"`
	Tasks []BoardTaskSpec `json:"tasks" yaml:"tasks"`
}

// BoardResult is what a holder leaves when it completes or fails a task:
// small, so that a dependent task's context can carry it.
type BoardResult struct {
	Summary   string   `json:"summary,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"` // references (names in the board's artifact store)
	ExitCode  *int     `json:"exitCode,omitempty"`  // a run task's exit code
}

// BoardTask is a task as the board keeps it.
type BoardTask struct {
	V    int    `json:"v"`
	Plan string `json:"plan"`
	BoardTaskSpec
	Status     string       `json:"status"`
	Attempts   int          `json:"attemptsUsed"` // claims so far (a release gives one back)
	Holder     string       `json:"holder,omitempty"`
	LeaseUntil time.Time    `json:"leaseUntil,omitzero"` // the claim ends then unless renewed: min(last renewal + lease, ClaimedAt + timeout)
	ClaimedAt  time.Time    `json:"claimedAt,omitzero"`  // when the holder claimed it
	RenewedAt  time.Time    `json:"renewedAt,omitzero"`  // when the holder last renewed it (or claimed it)
	Result     *BoardResult `json:"result,omitempty"`
	Reason     string       `json:"reason,omitempty"` // why it failed, was released or cancelled, or what blocks it
	Parent     string       `json:"parent,omitempty"` // the task it was added under (by an agent)
	CreatedBy  string       `json:"createdBy"`        // "operator" or an agent's ID
	Created    time.Time    `json:"created"`
	Updated    time.Time    `json:"updated"`
	Revision   uint64       `json:"revision,omitempty"` // the entry's revision, as read (not stored)
}

// Key is the task's key in the bucket.
func (t BoardTask) Key() string { return BoardKey(t.Plan, t.ID) }

// BoardRequest is the body of every board request; each op reads what it
// needs.
type BoardRequest struct {
	V    int    `json:"v"`
	Plan string `json:"plan,omitempty"`
	Task string `json:"task,omitempty"`
	// claim: a kind to take (run or prompt; empty: either).
	Kind string `json:"kind,omitempty"`
	// list: only these statuses (empty: all); the page after After (the
	// Next of the page before), at most Limit tasks (0: as many as fit).
	Status []string `json:"status,omitempty"`
	After  string   `json:"after,omitempty"`
	Limit  int      `json:"limit,omitempty"`
	// complete, fail: what the holder leaves.
	Result *BoardResult `json:"result,omitempty"`
	// fail, release, cancel: why.
	Reason string `json:"reason,omitempty"`
	// apply: the whole plan; add: one subtask (Tasks[0]) under Task.
	Tasks []BoardTaskSpec `json:"tasks,omitempty"`
	// put, get: the artifact's name (BoardArtifactRule) under Task; put:
	// its bytes.
	Name string `json:"name,omitempty"`
	Data []byte `json:"data,omitempty"`
}

// BoardReply is the service's answer. Error is set when the request was
// refused (Code says which rule); nothing changed then.
type BoardReply struct {
	V     int         `json:"v"`
	Error string      `json:"error,omitempty"`
	Code  string      `json:"code,omitempty"`
	Task  *BoardTask  `json:"task,omitempty"`
	Tasks []BoardTask `json:"tasks,omitempty"`
	// list: set when more tasks follow: ask again with After = Next.
	Next string `json:"next,omitempty"`
	// claim: the results of the tasks the claimed one needs.
	Context []BoardTask `json:"context,omitempty"`
	// apply: what happened to each task of the plan.
	Changes []BoardChange `json:"changes,omitempty"`
	// claim, renew, renew-all, abandon: the board's lease (renew well within it).
	Lease Duration `json:"lease,omitempty"`
	// put, get: the artifact; get: its bytes.
	Artifact *BoardArtifact `json:"artifact,omitempty"`
	Data     []byte         `json:"data,omitempty"`
}

// Board error codes.
const (
	BoardErrInvalid   = "invalid"    // the request or plan breaks a rule (Error names it)
	BoardErrNotFound  = "not-found"  // no such task
	BoardErrNotHolder = "not-holder" // the caller does not hold the task
	BoardErrNotReady  = "not-ready"  // the task is not ready (someone else has it, or it waits)
	BoardErrForbidden = "forbidden"  // the caller may not do this (labels, assignee, kind)
	BoardErrLimit     = "limit"      // a claim limit or a quota
	BoardErrBusy      = "busy"       // the caller is past its request rate or its requests in flight: ask again in a moment
	BoardErrNothing   = "nothing"    // claim: nothing ready for this caller
	BoardErrConflict  = "conflict"   // the entry changed under the request: ask again
	BoardErrInternal  = "internal"
)

// BoardRetryable reports whether a refusal with this code may pass when
// asked again unchanged: the entry changed under the request, the board
// failed on it, or the caller was past its request bounds.
func BoardRetryable(code string) bool {
	return code == BoardErrConflict || code == BoardErrInternal || code == BoardErrBusy
}

// BoardChange is what applying a plan did to one task.
type BoardChange struct {
	Task   string `json:"task"`
	Change string `json:"change"` // created, updated, unchanged, kept, cancelled, refused
	Status string `json:"status"`
	Why    string `json:"why,omitempty"` // for kept and refused: why
}

// Changes an apply reports.
const (
	BoardCreated   = "created"
	BoardUpdated   = "updated"
	BoardUnchanged = "unchanged"
	BoardKept      = "kept"
	BoardRemoved   = "cancelled"
	// BoardRefused is a dry run's word for a task of the file that the
	// apply would refuse (one on the board the operator did not create):
	// the whole apply is then refused, and writes nothing.
	BoardRefused = "refused"
)

// BoardError is a refused request as a Go error.
type BoardError struct{ Code, Msg string }

func (e *BoardError) Error() string { return fmt.Sprintf("board: %s (%s)", e.Msg, e.Code) }

// BoardConfig is what the board service takes from the deploy (the
// topology file): each agent's labels, which the stack's config gives and
// an agent never asserts itself, how many tasks it may hold at once and how
// many subtasks it may add.
type BoardConfig struct {
	Agents []BoardAgent `json:"agents"`
	// KeepFinished is how long a finished plan (every task done, failed or
	// cancelled) stays on the board after its last change before the
	// service removes it; DefaultBoardKeepFinished when not above 0.
	KeepFinished Duration `json:"keepFinished,omitempty"`
	// Lease is how long a claim lasts unrenewed (its holder silent);
	// DefaultBoardLease when not above 0.
	Lease Duration `json:"lease,omitempty"`
}

// BoardDeadline is when t's claim ends whatever its renewals: claimed
// at plus its timeout (zero for a task claimed before claims had a time).
func BoardDeadline(t BoardTask) time.Time {
	if t.ClaimedAt.IsZero() {
		return time.Time{}
	}
	d := time.Duration(t.Timeout)
	if d <= 0 {
		d = DefaultBoardTimeout
	}
	return t.ClaimedAt.Add(d)
}

// DefaultBoardKeepFinished keeps a finished plan a week.
const DefaultBoardKeepFinished = 7 * 24 * time.Hour

// BoardDeleted is the change each task of a plan the operator removed (or
// the service pruned) shows: gone from the board.
const BoardDeleted = "deleted"

// BoardAgent is one agent as the board sees it.
type BoardAgent struct {
	ID         string   `json:"id"`
	Labels     []string `json:"labels,omitempty"`
	ClaimLimit int      `json:"claimLimit"`         // DefaultBoardClaimLimit when 0
	AddQuota   *int     `json:"addQuota,omitempty"` // DefaultBoardAddQuota when absent; 0: it may add none
}
