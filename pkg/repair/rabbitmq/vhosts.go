package rabbitmq

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// resolveVHosts fills cfg.Root and cfg.VHostDirs from cfg.Root when no
// vhost dir is given (a node or vhost dir is detected), and returns the
// absolute data dir and an empty plan for it. Planners need whole vhosts:
// bare store dirs or single files are ErrNoVHost.
func resolveVHosts(cfg *rscan.Config) (root string, plan *repair.Plan, err error) {
	if len(cfg.VHostDirs) == 0 {
		if len(cfg.StoreDirs) > 0 || len(cfg.Files) > 0 || cfg.Root == "" {
			return "", nil, ErrNoVHost
		}
		tg, err := scan.Detect(cfg.Root, scan.RabbitMQ)
		if err != nil {
			return "", nil, err
		}
		if len(tg.VHostDirs) == 0 {
			return "", nil, fmt.Errorf("%w: %s is a %s", ErrNoVHost, cfg.Root, tg.Kind)
		}
		cfg.Root, cfg.VHostDirs = tg.Root, tg.VHostDirs
	}
	if root, err = filepath.Abs(cfg.Root); err != nil {
		return "", nil, err
	}
	plan, err = repair.NewPlan(root, "", time.Now())
	return root, plan, err
}

// eachVHost runs the evidence-based scan of every vhost of cfg (resolved
// by resolveVHosts) and hands each result to fn, in order.
// scanned, when not nil, receives each vhost's files and findings (the
// scan a plan comes from). each, when not nil, is the scan's per-file
// callback (rscan.VHostOptions.EachFile): the records come through it, and
// v has none.
func eachVHost(ctx context.Context, root string, cfg rscan.Config, scanned *scan.Result,
	each func(v *rscan.VHostScan, f *rscan.FileScan) error, fn func(dir string, v *rscan.VHostScan) error) error {
	for _, d := range cfg.VHostDirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		v, err := rscan.ScanVHost(ctx, root, d, rscan.VHostOptions{BrokerVersion: cfg.BrokerVersion, EachFile: each})
		if err != nil {
			return fmt.Errorf("%s: %w", scan.Rel(root, d), err)
		}
		if scanned != nil {
			v.AddTo(scanned)
		}
		if err := fn(d, v); err != nil {
			return err
		}
	}
	return nil
}
