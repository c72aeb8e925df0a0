package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// brokerVersion is Config.BrokerVersion parsed; set is false when none
// was given (then every generation's hazards count).
type brokerVersion struct {
	set                 bool
	major, minor, patch int
	gen                 int
	offByNineFix        bool
}

func parseVersion(s string) (brokerVersion, error) {
	if s == "" {
		return brokerVersion{}, nil
	}
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(strings.SplitN(p, "-", 2)[0])
		if err != nil || v < 0 || v > 999 {
			return brokerVersion{}, fmt.Errorf("broker version %q: want MAJOR.MINOR.PATCH", s)
		}
		n[i] = v
	}
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
