package flock

func (b BoardConfig) validate(es *errs) Board {
	out := DefaultBoard
	rangeClaimLimit.check(es, "flock:board.claimLimit", b.ClaimLimit, &out.ClaimLimit)
	rangeAddQuota.check(es, "flock:board.addQuota", b.AddQuota, &out.AddQuota)
	rangeKeepFinished.check(es, "flock:board.keepFinished", b.KeepFinished, &out.KeepFinished)
	rangeLease.check(es, "flock:board.lease", b.Lease, &out.Lease)
	return out
}
