package rabbitmq

import (
	"fmt"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// brokerVersion is Config.BrokerVersion parsed; set is false when none
// was given (then every generation's hazards count).
type brokerVersion struct {
	set                 bool
	major, minor, patch int
	gen                 int
	offByNineFix        bool
	// writtenBy313 is set when no version was given and every body term
	// is an #mc{} container: the files were written by 3.13.0 or later,
	// so a generation-1 reader (3.10-3.13.0) can only be 3.13.0 itself or
	// a downgrade. Generation-1 hazards are then info, not errors.
	writtenBy313 bool
}

// infer applies the one generation rule, whatever path the files were
// reached by: with no --broker-version, a store whose message terms are
// all #mc{} was written by 3.13+ (writtenBy313). It returns what was
// assumed, for the run's assumptions ("" when a version was given).
func (v *brokerVersion) infer(termCnt map[string]int, what string) string {
	if v.set {
		return ""
	}
	mc, basic := termCnt[rfmt.RecordMC], termCnt[rfmt.RecordBasicMessage]
	switch {
	case mc > 0 && basic == 0:
		v.writtenBy313 = true
		return fmt.Sprintf("broker version unknown (no --broker-version): the %s holds only #mc{} message terms, written by 3.13+, so generation-1 (3.10.0-3.13.0) scanner hazards are info; every other version is considered", what)
	case mc == 0 && basic == 0:
		return fmt.Sprintf("broker version unknown (no --broker-version): the %s holds no message term to tell the writer by, so every version is considered", what)
	}
	return fmt.Sprintf("broker version unknown (no --broker-version): the %s holds 3.x #basic_message{} terms, so every version is considered", what)
}

// onlyGen1 reports whether h bites generation-1 scanners only.
func onlyGen1(h *Hazard) bool {
	for _, g := range h.Gens {
		if g != 1 {
			return false
		}
	}
	return len(h.Gens) > 0
}

func parseVersion(s string) (brokerVersion, error) {
	if s == "" {
		return brokerVersion{}, nil
	}
	major, minor, patch, err := rfmt.ParseVersion(s)
	if err != nil {
		return brokerVersion{}, err
	}
	n := [3]int{major, minor, patch}
	v := brokerVersion{set: true, major: n[0], minor: n[1], patch: n[2]}
	var o rfmt.ScanOptions
	v.gen, o = rfmt.ScanOptionsFor(n[0], n[1], n[2])
	v.offByNineFix = o.OffByNineFix
	return v, nil
}

// affected reports whether the configured broker runs one of gens (with
// the off-by-nine bound for offByNine hazards); true when no version is set.
func (v brokerVersion) affected(h *Hazard) bool {
	if !v.set {
		return true
	}
	for _, g := range h.Gens {
		if g == v.gen && (h.Code != CodeOffByNine || !v.offByNineFix) {
			return true
		}
	}
	return false
}
