package rabbitmq

// Compact hazard victims for lean verify: the ids only, as [16]byte keys.

// victimIDs holds, per msg id, the at-risk keys (bit k: atRiskKeys[k])
// of the scanner bugs that lose it, and the hazard code that makes the
// configured version lose it in a dirty recovery.
type victimIDs struct {
	risk map[[16]byte]uint8
	lost map[[16]byte]string
}

// compactVictims is hazardVictims with [16]byte keys and a bit set.
func compactVictims(v *VHostScan, ver brokerVersion) *victimIDs {
	out := &victimIDs{risk: map[[16]byte]uint8{}, lost: map[[16]byte]string{}}
	for _, f := range v.Files {
		if f.Transient {
			continue
		}
		for i := range f.Hazards {
			h := &f.Hazards[i]
			bit := uint8(0)
			for k, key := range atRiskKeys {
				if atRiskKey(h.Code) == key {
					bit = 1 << k
				}
			}
			dirty := false
			for _, w := range h.When {
				dirty = dirty || w == "dirty recovery"
			}
			lose := ver.set && dirty && ver.affected(h)
			for _, vic := range h.Victims {
				id := vic.ID
				if bit != 0 {
					out.risk[id] |= bit
				}
				if lose {
					out.lost[id] = h.Code
				}
			}
		}
	}
	return out
}

func (c *victimIDs) atRisk(k int, id string) bool {
	if len(c.risk) == 0 {
		return false
	}
	b, ok := decodeID(id)
	return ok && c.risk[b]&(1<<k) != 0
}

func (c *victimIDs) lostBy(id string) string {
	if len(c.lost) == 0 {
		return ""
	}
	b, ok := decodeID(id)
	if !ok {
		return ""
	}
	return c.lost[b]
}
