package scan

// ExtraRecoveryEndUnknown is the Result.Extra key of a RocketMQ scan
// (commitlog or DLedger) that could not tell where the broker's recovery
// ends, in place of Result.RecoveryEnd: {"at_least": offset, "waits_on":
// file, "missing": assumption}. The recovery reaches at least at_least;
// waits_on is the file that would tell (one not read in full, or what
// says which recovery runs) and missing, when set, the assumption the
// scan could not make (the store version, the consume queues' max).
const ExtraRecoveryEndUnknown = "recovery_end_unknown"

// EndUnknown is what a scan records under ExtraRecoveryEndUnknown.
type EndUnknown struct {
	AtLeast int64
	WaitsOn string
	Missing string // "" when a file not read is the reason
}

// SetEndUnknown records e under ExtraRecoveryEndUnknown (RecoveryEnd is
// the caller's to leave nil).
func (r *Result) SetEndUnknown(e EndUnknown) {
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	u := map[string]any{"at_least": e.AtLeast, "waits_on": e.WaitsOn}
	if e.Missing != "" {
		u["missing"] = e.Missing
	}
	r.Extra[ExtraRecoveryEndUnknown] = u
}

// EndUnknown is what r records under ExtraRecoveryEndUnknown; ok is false
// when the scan knew where recovery ends (or made no such claim).
func (r *Result) EndUnknown() (e EndUnknown, ok bool) {
	u, ok := r.Extra[ExtraRecoveryEndUnknown].(map[string]any)
	if !ok {
		return e, false
	}
	e.AtLeast, _ = u["at_least"].(int64)
	e.WaitsOn, _ = u["waits_on"].(string)
	e.Missing, _ = u["missing"].(string)
	return e, true
}
