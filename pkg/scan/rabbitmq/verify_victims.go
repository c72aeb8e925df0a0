package rabbitmq

// Hazard victims for verify's prediction: the ids only, as [16]byte keys.

// victimIDs holds, per msg id, the at-risk keys (bit k: atRiskKeys[k])
// of the scanner bugs that lose it, in the scanner's id table (every
// victim is a record, so its id is there already: no second map of the
// store's ids), and the hazard code that makes the configured version
// lose it in a dirty recovery.
type victimIDs struct {
	seen *idTable
	any  bool // some id has risk bits
	lost map[[16]byte]string
	// cur, in a spilled verify, answers instead for the entry fate
	// decides (entry: one queue's, in the order the entries are read).
	cur *answerCursor
}

// entry tells a spilled verify's cursor which entry is decided next.
func (c *victimIDs) entry(id [16]byte) {
	if c.cur != nil {
		c.cur.at(id)
	}
}

// eachVictimHazard calls fn with each hazard of every persistent file
// whose victims matter to the prediction, and its victimClass, in file
// order, until fn returns an error.
func eachVictimHazard(v *VHostScan, ver brokerVersion, fn func(h *Hazard, bit uint8, lose bool) error) error {
	for _, f := range v.Files {
		if f.Transient {
			continue
		}
		for i := range f.Hazards {
			h := &f.Hazards[i]
			if bit, lose := victimClass(h, ver); bit != 0 || lose {
				if err := fn(h, bit, lose); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// victimClass is what a hazard's victims are to the prediction: bit is
// the at-risk key bit of the scanner bug that loses them (atRiskKeys; 0
// when none does), lose whether the configured version's scanner loses
// them in a dirty recovery. compactVictims and the spilled verify's
// victim sort (sortVictims) both classify with it.
func victimClass(h *Hazard, ver brokerVersion) (bit uint8, lose bool) {
	for k, key := range atRiskKeys {
		if atRiskKey(h.Code) == key {
			bit = 1 << k
		}
	}
	dirty := false
	for _, w := range h.When {
		dirty = dirty || w == "dirty recovery"
	}
	return bit, ver.set && dirty && ver.affected(h)
}

// compactVictims collects, from every persistent file's hazards, the ids
// each at-risk key's scanner bug loses (as bits in seen, the scanner's id
// table) and the ids
// the configured version's scanner loses in a dirty recovery. Its error
// is from reading spilled victim lists back.
func compactVictims(v *VHostScan, ver brokerVersion, seen *idTable) (*victimIDs, error) {
	out := &victimIDs{seen: seen, lost: map[[16]byte]string{}}
	err := eachVictimHazard(v, ver, func(h *Hazard, bit uint8, lose bool) error {
		// The at-risk ids are marked a batch at a time, the table warmed
		// for each batch first (idTable.warm).
		var batch [warmBatch][16]byte
		n := 0
		flush := func() {
			seen.warm(n, func(k int) *[16]byte { return &batch[k] })
			for _, id := range batch[:n] {
				slot, e := seen.lookup(id) // one search for the read and the store
				e.addRisk(bit)
				seen.store(slot, id, e)
			}
			n = 0
		}
		err := h.EachVictim(func(vic Victim) {
			if bit != 0 {
				batch[n] = vic.ID
				if n++; n == warmBatch {
					flush()
				}
				out.any = true
			}
			if lose {
				out.lost[vic.ID] = h.Code
			}
		})
		flush()
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// risk returns the at-risk key bits of the shared-store msg id (bit k: a
// version with the scanner bug of atRiskKeys[k] loses it).
func (c *victimIDs) risk(id [16]byte) uint8 {
	if c.cur != nil {
		return c.cur.risk()
	}
	if !c.any {
		return 0
	}
	return c.seen.get(id).risk()
}

// lostBy returns the hazard code that makes the configured version lose
// the msg id in a dirty recovery, "" if none.
func (c *victimIDs) lostBy(id [16]byte) string {
	if c.cur != nil {
		return c.cur.lostBy()
	}
	if len(c.lost) == 0 {
		return ""
	}
	return c.lost[id]
}
