package main

import (
	"context"
	"errors"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	streamrepair "github.com/storectl/storectl/pkg/repair/stream"
	"github.com/storectl/storectl/pkg/scan"
	streamscan "github.com/storectl/storectl/pkg/scan/stream"
)

// streamPlanFunc is a stream repair planner (pkg/repair/stream).
type streamPlanFunc func(context.Context, streamrepair.Config, *repair.Plan) (*repair.Plan, *streamrepair.Report, error)

// withStreamPlan makes one planner of a RabbitMQ target's classic planner
// and its stream planner: the classic one runs when the target has
// classic parts, the stream one adds its actions to the same plan, and
// the report has both (the stream one under "stream_"+key).
func withStreamPlan(env *Env, t scan.Target, key string, classic planner, fn streamPlanFunc) planner {
	return func(ctx context.Context) (*repair.Plan, *scan.Result, map[string]any, error) {
		var p *repair.Plan
		var scanned *scan.Result
		extra := map[string]any{}
		if hasClassic(t) {
			var err error
			if p, scanned, extra, err = classic(ctx); err != nil {
				return nil, nil, nil, err
			}
			if extra == nil {
				extra = map[string]any{}
			}
		}
		sc, ok := streamConfig(env, t)
		if !ok {
			return p, scanned, extra, nil
		}
		rc := streamrepair.Config{Scan: sc, ToolVersion: version, KeepWholeEntries: env.Config.GetBool("keep-whole-entries")}
		p2, rep, err := fn(ctx, rc, p)
		if err != nil {
			return nil, nil, nil, usageIfVersion(err)
		}
		if scanned == nil {
			scanned = rep.Scan
		} else {
			scanned.Merge(rep.Scan)
		}
		extra["stream_"+key] = rep
		if p2 == nil {
			if p2, err = repair.NewPlan(t.Root, version, time.Now()); err != nil {
				return nil, nil, nil, err
			}
		}
		return p2, scanned, extra, nil
	}
}

// usageIfVersion: a bad --broker-version is a usage error.
func usageIfVersion(err error) error {
	if errors.Is(err, streamscan.ErrBrokerVersion) {
		return usagef(err)
	}
	return err
}
