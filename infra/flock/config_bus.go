package flock

import (
	"github.com/ai-flock/ai-flock/protocol"
)

func (b BusConfig) validate(es *errs) Bus {
	out := DefaultBus
	rangeHeartbeat.check(es, "flock:bus.heartbeatInterval", b.Heartbeat, &out.Heartbeat)
	rangeAckWait.check(es, "flock:bus.ackWait", b.AckWait, &out.AckWait)
	rangeStreamMaxAge.check(es, "flock:bus.streamMaxAge", b.StreamMaxAge, &out.StreamMaxAge)
	rangeMaxDeliver.check(es, "flock:bus.maxDeliver", b.MaxDeliver, &out.MaxDeliver)
	var kib, streamMiB, jsMiB int = out.MaxPayloadBytes >> 10, int(out.StreamMaxBytes >> 20), int(out.JetStreamMaxBytes >> 20)
	rangeMaxPayload.check(es, "flock:bus.maxPayloadKiB", b.MaxPayloadKiB, &kib)
	rangeStreamMiB.check(es, "flock:bus.streamMaxMiB", b.StreamMaxMiB, &streamMiB)
	rangeJetStreamMiB.check(es, "flock:bus.jetStreamMaxMiB", b.JetStreamMaxMiB, &jsMiB)
	out.MaxPayloadBytes, out.StreamMaxBytes, out.JetStreamMaxBytes = kib<<10, int64(streamMiB)<<20, int64(jsMiB)<<20
	// The task and dead-letter streams share the JetStream store with the
	// agents' results streams (resultsShare), the status stream, the
	// spending ledger and the board.
	if out.StreamMaxBytes*2+StatusStreamBytes+protocol.LedgerBucketBytes+protocol.BoardBucketBytes+protocol.ArtifactStoreBytes+protocol.ServicesBucketBytes > out.JetStreamMaxBytes {
		es.add("flock:bus.streamMaxMiB", "two streams (tasks, dead letters) of %d MiB must fit in flock:bus.jetStreamMaxMiB %d", streamMiB, jsMiB)
	}
	if int64(out.MaxPayloadBytes) > out.StreamMaxBytes {
		es.add("flock:bus.maxPayloadKiB", "must not exceed flock:bus.streamMaxMiB")
	}
	if b.PeerKiBps != nil {
		if v := *b.PeerKiBps; v != 0 && (v < 64 || v > 1<<22) {
			es.add("flock:bus.peerKiBps", "must be 0 (no limit) or between 64 and %d KiB/s (got %d)", 1<<22, v)
		} else {
			out.PeerBytesPerSecond = int64(v) << 10
		}
	}
	rangeConnections.check(es, "flock:bus.connectionsPerPeer", b.ConnectionsPerPeer, &out.ConnectionsPerPeer)
	if b.Replicas != nil {
		if v := *b.Replicas; v != 1 && v != 3 {
			es.add("flock:bus.replicas", "must be 1 (one bus node) or 3 (a three-node cluster that survives losing one) (got %d)", v)
		} else {
			out.Replicas = v
		}
	}
	out.Limits = b.Limits.validate(es, "flock:bus.limits", DefaultBus.Limits)
	if b.Limits.DiskMiB != nil {
		es.add("flock:bus.limits.diskMiB", "is an agent's limit: the bus's store is bounded by flock:bus.jetStreamMaxMiB")
	}
	return out
}

// resultsShare is the size of each agent's results stream: explicit, or the
// store left after the task and dead-letter streams, the audit trail, the status stream, the
// ledger, the board, its artifacts and the agents' mailboxes (protocol.MailBytes each),
// shared out equally (at most DefaultResultsPerAgent). Each share must hold
// a couple of the largest results, and all of them must fit in the store.
func (b BusConfig) resultsShare(es *errs, bus Bus, audit Audit, agents int) int64 {
	left := bus.JetStreamMaxBytes - 2*bus.StreamMaxBytes - audit.MaxBytes - protocol.AuditAnchorsBytes - StatusStreamBytes - protocol.LedgerBucketBytes - protocol.BoardBucketBytes - protocol.ArtifactStoreBytes - protocol.ServicesBucketBytes - int64(agents)*protocol.MailBytes
	share := min(DefaultResultsPerAgent, left/int64(agents))
	if b.ResultsMiBPerAgent != nil {
		mib := *b.ResultsMiBPerAgent
		if mib < rangeResultsMiB.lo || mib > rangeResultsMiB.hi {
			es.add("flock:bus.resultsMiBPerAgent", "must be between %d and %d %s (got %d)", rangeResultsMiB.lo, rangeResultsMiB.hi, rangeResultsMiB.unit, mib)
			return DefaultResultsPerAgent
		}
		share = int64(mib) << 20
		if share*int64(agents) > left {
			es.add("flock:bus.resultsMiBPerAgent", "%d agents × %d MiB must fit in flock:bus.jetStreamMaxMiB %d after the task and dead-letter streams (2 × %d MiB) the status stream, the ledger, the board and the mailboxes (%d MiB each): at most %d MiB each",
				agents, mib, bus.JetStreamMaxBytes>>20, bus.StreamMaxBytes>>20, protocol.MailBytes>>20, max(left/int64(agents), 0)>>20)
		}
		return share
	}
	if share < 2*int64(bus.MaxPayloadBytes) {
		es.add("flock:bus.jetStreamMaxMiB", "%d MiB leaves %d agents %d KiB each for their results after the task and dead-letter streams (2 × %d MiB): each needs room for 2 of the largest messages (2 × %d KiB) beside its mailbox (%d MiB); raise it or lower flock:bus.streamMaxMiB",
			bus.JetStreamMaxBytes>>20, agents, max(share, 0)>>10, bus.StreamMaxBytes>>20, bus.MaxPayloadBytes>>10, protocol.MailBytes>>20)
	}
	return max(share, 0)
}
