package rabbitmq

// Preconditions of rebuild-index: is clean.dot trustworthy (§1.3)?

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format/etf"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// rbETSIndexModule is the only index module whose saved state the broker
// (and this rebuild) knows: rabbit_msg_store_ets_index.
const rbETSIndexModule = "rabbit_msg_store_ets_index"

// rbCheckMarkers checks clean.dot of a store against the queue side. It
// returns "" when the markers are consistent, else why they are not. The
// error is for I/O failures. It fills vr.ClientRefs.
//
// What the broker checks and what can be checked offline: the broker
// trusts its saved state when clean.dot and both .ets files are readable
// and client_refs equals, as a set, the persistent_ref values of the
// durable queues' recovery terms in recovery.dets. recovery.dets is opaque
// DETS here, so the set equality cannot be checked; what can: clean.dot
// parses, names the ETS index module (when it names one), its refs are
// distinct, and there are at least as many as queues holding shared-store
// references (each such queue had a persistent store client). On top of
// the broker's own checks, a clean start never looks for the messages the
// queues reference: if the scan finds a referenced message in no file, or
// a queue index is damaged (its reference counts are then uncertain and a
// too-low count frees a message a queue still holds), the clean state is
// not safe to keep.
func rbCheckMarkers(store string, v *rscan.VHostScan, vr *RebuildVHost) (string, error) {
	p := filepath.Join(store, rbCleanDot)
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if st.Size() > rbMaxSmallFile {
		return fmt.Sprintf("clean.dot is %d bytes, over the %d this tool reads", st.Size(), rbMaxSmallFile), nil
	}
	b, err := storefile.ReadFile(p)
	if err != nil {
		return "", err
	}
	cd, perr := rfmt.ParseCleanDot(b)
	if perr != nil {
		return fmt.Sprintf("clean.dot does not parse (%v), so the broker cannot read it either", perr), nil
	}
	vr.ClientRefs = len(cd.ClientRefs)
	var why []string
	hasRefs := false
	for _, t := range cd.Terms {
		if kv, ok := t.(etf.Tuple); ok && len(kv) == 2 && kv[0] == etf.Atom("client_refs") {
			hasRefs = true
		}
	}
	if !hasRefs {
		why = append(why, "clean.dot has no client_refs term")
	}
	if cd.IndexModule != "" && cd.IndexModule != rbETSIndexModule {
		why = append(why, fmt.Sprintf("clean.dot names index module %s, not %s: its saved index is not an .ets dump this tool can rebuild", cd.IndexModule, rbETSIndexModule))
	}
	seen := map[[16]byte]bool{}
	for _, r := range cd.ClientRefs {
		if seen[r] {
			why = append(why, fmt.Sprintf("client ref %x is listed twice in clean.dot", r))
			break
		}
		seen[r] = true
	}
	switch {
	case v.Queues == nil && len(cd.ClientRefs) > 0:
		why = append(why, fmt.Sprintf("clean.dot lists %d client refs but the vhost has no queues dir, so no queue's recovery terms can match them", len(cd.ClientRefs)))
	case len(cd.ClientRefs) < vr.QueuesWithRefs:
		why = append(why, fmt.Sprintf("clean.dot lists %d client refs but %d queues hold shared-store references, each through its own client", len(cd.ClientRefs), vr.QueuesWithRefs))
	}
	if len(v.Lost) > 0 {
		why = append(why, fmt.Sprintf("the queues reference %d message(s) that no .rdq file holds (e.g. %s); a clean start would not notice and fail when it reads them, a dirty recovery drops them", len(v.Lost), v.Lost[0]))
	}
	if v.Queues != nil {
		if an := v.Queues.AllAnomalies(); len(an) > 0 {
			why = append(why, fmt.Sprintf("%d queue index anomal(ies) (first: %v): the reference counts derived from the indexes are uncertain", len(an), an[0]))
		}
	}
	if len(cd.ClientRefs) > vr.QueueDirs && v.Queues != nil {
		vr.Notes = append(vr.Notes, fmt.Sprintf("clean.dot lists %d client refs for %d queue dirs; the broker compares them with recovery.dets, which is not checked here", len(cd.ClientRefs), vr.QueueDirs))
	}
	return rbJoin(why), nil
}
