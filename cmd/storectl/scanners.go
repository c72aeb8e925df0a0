package main

import (
	"context"
	"fmt"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

// scanTarget runs the store-specific scanner for t.
func scanTarget(ctx context.Context, t scan.Target, so scan.Options, opts *scanOptions) (*scan.Result, error) {
	switch t.Store {
	case scan.RocketMQ, scan.RabbitMQ:
	}
	return nil, fmt.Errorf("%s scanning is not wired yet", t.Store)
}

// liveCheck marks the run live when a broker seems to use the data dir.
func liveCheck(env *Env, run *report.Run, t scan.Target) {}
