// Command genstore writes a deterministic, realistic store of a given kind
// and size with internal/gen/rocketmq or internal/gen/rabbitmq, for
// benchmarks (scripts/bench-cli.sh) and manual testing.
//
//	genstore -kind rocketmq -size 1GiB -out /tmp/rmq -seed 1
//	genstore -kind rabbitmq -size 4GiB -out /tmp/rabbit
//	genstore -kind rabbitmq-quorum -size 1GiB -out /tmp/qq
//
// RocketMQ: mixed topics and queues, bodies of 0-20000 bytes (-body-size
// MIN-MAX draws them from a range instead, e.g. 100-200 for a store of
// small messages), keys, tags, IPv6 hosts, commitlog files of -file-size
// ending in BLANK records (the last one half full and zero-filled), and
// matching consume queues, sparse as the broker leaves them (-topics N
// -queues-per-topic M spreads the records over N×M queues), and the index
// files (420 MB each, the entries past the last a hole) and checkpoint a
// cleanly stopped broker leaves. The store root is -out.
//
//	genstore -kind rocketmq -size 1GiB -body-size 100-200 -out /tmp/small
//	genstore -kind rocketmq -size 1GiB -topics 1000 -queues-per-topic 40 -out /tmp/queues
//
// rocketmq-timer: a 5.x store of timer messages (commitlog, timer consume
// queue, timerlog, wheel, timercheck) whose timer keeps up: a few thousand
// units due after the checkpoint's read time whatever the size.
// rocketmq-dledger: a DLedger store (dledger-n0/ data, index, checkpoint,
// currterm) with consume queues at the inner offsets.
//
// RabbitMQ: one vhost whose msg_store_persistent holds .rdq files of about
// -file-size with #basic_message{} (or #mc{} with -mc) records of
// 4096-20000-byte payloads (-body-size MIN-MAX), zero holes before about
// one record in 50 and one unreferenced record in 20, and v2 queue indexes
// (q1..q4, or q1..qN with -queues N) referencing the rest; with -clean also the files
// a clean stop leaves (clean.dot, msg_store_index.ets, file_summary.ets).
// It prints the vhost dir.
//
// rabbitmq-stream: a node dir with one stream (-queues N: N streams) of
// osiris segments rolled over at -file-size (default osiris' 500 MB) and
// their indexes, 4.0-style AMQP 1.0 messages of 100-2000-byte bodies
// (-body-size) in chunks of 1-50. It prints the node dir.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	genquorum "github.com/storectl/storectl/internal/gen/quorum"
	genrabbit "github.com/storectl/storectl/internal/gen/rabbitmq"
	genrmq "github.com/storectl/storectl/internal/gen/rocketmq"
	gen5x "github.com/storectl/storectl/internal/gen/rocketmq5x"
	genstream "github.com/storectl/storectl/internal/gen/stream"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "genstore:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("genstore", flag.ContinueOnError)
	kind := fs.String("kind", "rocketmq", "store kind: rocketmq or rabbitmq")
	size := fs.String("size", "64MiB", "store size (bytes of store files), e.g. 64MiB, 1GiB, 4GiB")
	out := fs.String("out", "", "output dir (created; must be empty or absent)")
	seed := fs.Uint64("seed", 1, "generator seed; the same seed and size give the same bytes")
	fileSize := fs.String("file-size", "", "store file size (default: RocketMQ 128MiB commitlog files, RabbitMQ 16MiB .rdq files)")
	mc := fs.Bool("mc", false, "RabbitMQ: write 3.13+/4.x #mc{} terms instead of #basic_message{}")
	queues := fs.Int("queues", 0, "RabbitMQ: number of queues q1..qN the messages go to (default 4)")
	clean := fs.Bool("clean", false, "RabbitMQ: also write the clean-shutdown files (clean.dot, msg_store_index.ets, file_summary.ets)")
	bodySize := fs.String("body-size", "", "body (RabbitMQ: payload) sizes MIN-MAX in bytes, e.g. 100-200, instead of the default mix (RabbitMQ 4096-20000)")
	nTopics := fs.Int("topics", 0, "RocketMQ: spread the records over this many topics instead of the default five")
	qpt := fs.Int("queues-per-topic", 4, "RocketMQ, with -topics: queues of each topic")
	index := fs.Bool("index", true, "RocketMQ: also write the index files and the checkpoint a cleanly stopped broker leaves (-index=false: commitlog and consume queues only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	total, err := parseSize(*size)
	if err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	if ents, err := os.ReadDir(*out); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s is not empty", *out)
	}
	switch *kind {
	case "rocketmq":
		mapped := int64(128 << 20)
		if *fileSize != "" {
			if mapped, err = parseSize(*fileSize); err != nil {
				return fmt.Errorf("-file-size: %w", err)
			}
		}
		mapped = min(mapped, max(total, 1<<20))
		// Stop half-way into the last file, so the files add up to total.
		files := max((total+mapped-1)/mapped, 1)
		cfg := genrmq.Config{MappedFileSize: mapped, TotalBytes: (files-1)*mapped + mapped/2, Seed: *seed,
			Topics: *nTopics, QueuesPerTopic: *qpt, Index: *index}
		if *bodySize != "" {
			a, b, err := parseRange(*bodySize)
			if err != nil {
				return fmt.Errorf("-body-size: %w", err)
			}
			cfg.BodyMin, cfg.BodyMax, cfg.MaxBody = a, b, max(b, 1)
		}
		sum, err := genrmq.Generate(*out, cfg)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%d commitlog files\t%d messages\t%d bytes\n", *out, len(sum.Files), sum.Messages, int64(len(sum.Files))*mapped)
	case "rabbitmq":
		limit := int64(16 << 20)
		if *fileSize != "" {
			if limit, err = parseSize(*fileSize); err != nil {
				return fmt.Errorf("-file-size: %w", err)
			}
		}
		k := genrabbit.BasicMessage
		if *mc {
			k = genrabbit.MC
		}
		lo, hi, err := parseRange(*bodySize)
		if err != nil {
			return fmt.Errorf("-body-size: %w", err)
		}
		sum, err := genrabbit.Generate(*out, genrabbit.Config{Seed: *seed, Kind: k, TotalBytes: total,
			FileLimit: limit, HoleEvery: 50, UnrefEvery: 20, CleanShutdown: *clean, Queues: *queues,
			BodyMin: lo, BodyMax: hi})
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%d rdq files\t%d records\t%d bytes\n", sum.VHostDir, len(sum.Files), sum.Records, sum.Bytes)
	case "rabbitmq-stream":
		cfg := genstream.Config{Seed: *seed, TotalBytes: total, Streams: *queues}
		if *fileSize != "" {
			if cfg.MaxSegmentSize, err = parseSize(*fileSize); err != nil {
				return fmt.Errorf("-file-size: %w", err)
			}
		}
		if cfg.BodyMin, cfg.BodyMax, err = parseRange(*bodySize); err != nil {
			return fmt.Errorf("-body-size: %w", err)
		}
		sum, err := genstream.Generate(*out, cfg)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%d segments\t%d chunks\t%d messages\t%d bytes\n", sum.Node, sum.Segments, sum.Chunks, sum.Messages, sum.Bytes)
	case "rabbitmq-quorum":
		cfg := genquorum.Config{Seed: *seed, TotalBytes: total, Queues: *queues}
		if cfg.BodyMin, cfg.BodyMax, err = parseRange(*bodySize); err != nil {
			return fmt.Errorf("-body-size: %w", err)
		}
		sum, err := genquorum.Generate(*out, cfg)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%d segments\t%d WAL records\t%d messages\t%d bytes\n", filepath.Join(sum.Node, "quorum"), sum.Segments, sum.WALRecords, sum.Messages, sum.Bytes)
	case "rocketmq-timer", "rocketmq-dledger":
		cfg := gen5x.Config{TotalBytes: total, Seed: *seed}
		if *fileSize != "" {
			if cfg.FileSize, err = parseSize(*fileSize); err != nil {
				return fmt.Errorf("-file-size: %w", err)
			}
		}
		gen := gen5x.GenerateTimer
		if *kind == "rocketmq-dledger" {
			gen = gen5x.GenerateDLedger
		}
		sum, err := gen(*out, cfg)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%d messages\t%d timer units (%d pending)\t%d log bytes\n", *out, sum.Messages, sum.Units, sum.Pending, sum.LogBytes)
	default:
		return fmt.Errorf("-kind must be rocketmq, rocketmq-timer, rocketmq-dledger, rabbitmq, rabbitmq-stream or rabbitmq-quorum, not %q", *kind)
	}
	return nil
}

// parseRange reads "MIN-MAX" (or one number N for N-N); "" is 0, 0.
func parseRange(s string) (lo, hi int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	if lo, err = strconv.Atoi(strings.TrimSpace(a)); err == nil {
		hi, err = strconv.Atoi(strings.TrimSpace(b))
	}
	if err != nil || lo < 0 || hi < lo || hi > 1<<29 {
		return 0, 0, fmt.Errorf("bad range %q (want MIN-MAX, 0 <= MIN <= MAX)", s)
	}
	return lo, hi, nil
}

// parseSize reads "1GiB", "64MiB", "512KiB", "1G", "1048576".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n > 1<<50/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}
