package main

import (
	"context"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	quorumrepair "github.com/storectl/storectl/pkg/repair/quorum"
	"github.com/storectl/storectl/pkg/scan"
	quorumscan "github.com/storectl/storectl/pkg/scan/quorum"
)

// withQuorumPlan makes one planner of a RabbitMQ target's other planner
// and its quorum-queue part: truncate adds the WAL cuts
// (pkg/repair/quorum) to the same plan; the other writers (fn nil) add
// only the quorum scan, so that their runs count what scan counts.
func withQuorumPlan(t scan.Target, key string, inner planner, truncate bool) planner {
	return func(ctx context.Context) (*repair.Plan, *scan.Result, map[string]any, error) {
		p, scanned, extra, err := inner(ctx)
		if err != nil {
			return p, scanned, extra, err
		}
		qc, ok := quorumConfig(t)
		if !ok {
			return p, scanned, extra, nil
		}
		if extra == nil {
			extra = map[string]any{}
		}
		var qres *scan.Result
		if truncate {
			var rep *quorumrepair.Report
			if p, rep, err = quorumrepair.PlanTruncate(ctx, quorumrepair.Config{Scan: qc, ToolVersion: version}, p); err != nil {
				return nil, nil, nil, err
			}
			qres = rep.Scan
			extra["quorum_"+key] = rep
		} else {
			r, err := quorumscan.Scan(ctx, qc, scan.Options{})
			if err != nil {
				return nil, nil, nil, err
			}
			qres = r.Result
		}
		if scanned == nil {
			scanned = qres
		} else {
			scanned.Merge(qres)
		}
		if p == nil {
			if p, err = repair.NewPlan(t.Root, version, time.Now()); err != nil {
				return nil, nil, nil, err
			}
		}
		return p, scanned, extra, nil
	}
}
