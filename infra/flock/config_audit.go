package flock

import "github.com/ai-flock/ai-flock/protocol"

func (a AuditConfig) validate(es *errs, bus Bus) Audit {
	out := DefaultAudit
	rangeAuditKeep.check(es, "flock:audit.retention", a.Retention, &out.Retention)
	if a.MaxMiB == nil {
		out.MaxBytes = 0 // derived once the agents are known (defaultBytes)
		return out
	}
	mib := int(out.MaxBytes >> 20)
	rangeAuditMiB.check(es, "flock:audit.maxMiB", a.MaxMiB, &mib)
	out.MaxBytes = int64(mib) << 20
	if out.MaxBytes+2*bus.StreamMaxBytes > bus.JetStreamMaxBytes {
		es.add("flock:audit.maxMiB", "%d MiB and the task and dead-letter streams (2 × %d MiB) must fit in flock:bus.jetStreamMaxMiB %d", mib, bus.StreamMaxBytes>>20, bus.JetStreamMaxBytes>>20)
	}
	return out
}

// defaultAuditBytes is the trail's store when flock:audit.maxMiB is unset:
// protocol.DefaultAuditBytes, at most an eighth of the bus's store, and no
// more than the store leaves once every other stream and each agent's
// mailbox and two of the largest results are counted (at least 1 MiB), so
// that a flock that fitted before the trail still fits.
func defaultAuditBytes(bus Bus, agents int) int64 {
	left := bus.JetStreamMaxBytes - 2*bus.StreamMaxBytes - protocol.AuditAnchorsBytes - StatusStreamBytes - protocol.LedgerBucketBytes -
		protocol.BoardBucketBytes - protocol.ArtifactStoreBytes - protocol.ServicesBucketBytes - int64(agents)*(protocol.MailBytes+2*int64(bus.MaxPayloadBytes))
	return max(1<<20, min(protocol.DefaultAuditBytes, bus.JetStreamMaxBytes/8, left))
}
