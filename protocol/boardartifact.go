package protocol

// Artifacts: what a task leaves for the tasks that need it, kept by the
// board service in an object store of its own (ArtifactBucket), never in
// another agent's directory. An agent puts an artifact only under a task it
// holds, within its quota; it gets one of a task its held task needs (or
// one it put); the operator gets any. A plan's artifacts go with the plan
// (plan remove, or the sweep after flock:board.keepFinished).
const (
	BoardOpPut = "put" // an artifact of a task the caller holds
	BoardOpGet = "get" // an artifact of a task

	ArtifactBucket = "FLOCK_ARTIFACTS"
	// ArtifactStream is the object store's stream.
	ArtifactStream = "OBJ_" + ArtifactBucket
	// ArtifactStoreBytes is the store the artifacts may use (counted in the
	// bus's store like the board's bucket); ArtifactQuotaBytes the most one
	// agent's artifacts may take of it, all told, each charged what it
	// costs the store (ArtifactQuota: a flock of many agents shares the
	// store out), ArtifactQuotaObjects how many it may keep, and
	// ArtifactBytes the largest artifact (a request carries it, base64 in
	// JSON, within the bus's default max payload). ArtifactReserveBytes is
	// the part of the store no agent's share holds: room for what the
	// store keeps beyond the artifacts (the markers of deleted ones while
	// they are purged).
	ArtifactStoreBytes   = 16 << 20
	ArtifactQuotaBytes   = 4 << 20
	ArtifactQuotaObjects = 64
	ArtifactBytes        = 256 << 10
	ArtifactReserveBytes = 1 << 20
	// ArtifactsDir is where a run task's command leaves the artifacts the
	// runtime puts on the board when it succeeds (in its task directory),
	// and NeedsDir where the runtime writes, before the command runs, the
	// artifacts of the tasks it needs (NeedsDir/<task>/<name>).
	ArtifactsDir = "artifacts"
	NeedsDir     = "needs"
)

// ArtifactQuota is what each agent of a flock of agents may keep in the
// artifact store, in bytes as the board charges them: ArtifactQuotaBytes,
// or an equal share of the store less its reserve when the agents'
// quotas together would not fit it, so that no agent at its bound (nor
// all of them) can take the room another agent's share holds.
func ArtifactQuota(agents int) int {
	if agents < 1 {
		agents = 1
	}
	return min(ArtifactQuotaBytes, (ArtifactStoreBytes-ArtifactReserveBytes)/agents)
}

// ArtifactObject is an artifact's name in the store: "<plan>/<task>/<name>",
// an agent's subtask as BoardTaskFile names it ("<agent>.<id>"), so that no
// task's artifact is another's (agent-1/x's "a" and task agent-1's "x/a").
func ArtifactObject(plan, task, name string) string {
	return plan + "/" + BoardTaskFile(task) + "/" + name
}

// BoardArtifact describes a stored artifact.
type BoardArtifact struct {
	Plan   string `json:"plan"`
	Task   string `json:"task"`
	Name   string `json:"name"`
	Size   int    `json:"size"`
	By     string `json:"by"`               // the agent that put it
	Digest string `json:"digest,omitempty"` // the store's digest (SHA-256)
}
