package rocketmq

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"

	"github.com/storectl/storectl/pkg/scan"
)

// topicConfig is the part of a TopicConfig in config/topics.json that
// verify uses.
type topicConfig struct {
	ReadQueueNums  int `json:"readQueueNums"`
	WriteQueueNums int `json:"writeQueueNums"`
}

// maxTopicsJSON bounds the size of config/topics.json read into memory:
// far above any real broker's topic table.
const maxTopicsJSON = 256 << 20

// systemTopic reports topics the broker creates or uses without a user
// topic config (schedule, system, LMQ, retry/DLQ may also be absent).
func systemTopic(t string) bool {
	for _, p := range []string{"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_", "rmq_sys_", rmq.LMQPrefix, "%RETRY%", "%DLQ%", "TBW102", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "BenchmarkTest", "DefaultCluster", "TRANS_CHECK_MAX_TIME_TOPIC"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// checkTopics compares config/topics.json with the consume queue dirs.
func (v *verifier) checkTopics(context.Context) error {
	const rel = "config/topics.json"
	p := filepath.Join(v.cfg.Root, filepath.FromSlash(rel))
	st, err := os.Stat(p)
	if os.IsNotExist(err) {
		v.res.Layout["topics_json"] = false
		return nil
	}
	if err != nil {
		return err
	}
	v.res.Layout["topics_json"] = true
	if st.Size() > maxTopicsJSON {
		v.res.Add(scan.Finding{Code: CodeTopicsBadConfig, Severity: scan.Warning, Path: rel, Repair: scan.RepairNone,
			Message: "config/topics.json is too large to check"})
		return nil
	}
	b, err := storefile.ReadFile(p)
	if err != nil {
		// Nothing is concluded about the topics it lists (no
		// no-queue-dir, no unknown-topic from its absence).
		v.res.Add(scan.Unreadable(rel, err))
		return fmt.Errorf("%s: %w", rel, err)
	}
	var doc struct {
		TopicConfigTable map[string]topicConfig `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		v.res.Add(scan.Finding{Code: CodeTopicsBadConfig, Severity: scan.Warning, Path: rel, Repair: scan.RepairNone,
			Details: map[string]any{"error": err.Error()}, Message: "config/topics.json does not parse as a topic config table"})
		return nil
	}
	dirs := map[string]int32{} // topic -> highest queue id with a dir
	for k := range v.queues {
		dirs[k.topic] = max(dirs[k.topic], k.queueID+1)
	}
	names := make([]string, 0, len(dirs))
	for t := range dirs {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		tc, ok := doc.TopicConfigTable[t]
		if !ok {
			sev := scan.Warning
			if systemTopic(t) {
				sev = scan.Info
			}
			v.res.Add(scan.Finding{Code: CodeTopicUnknown, Severity: sev, Path: "consumequeue/" + t, Repair: scan.RepairNone,
				Message: fmt.Sprintf("topic %q has consume queues but is not in config/topics.json", t)})
			continue
		}
		if n := max(tc.ReadQueueNums, tc.WriteQueueNums); int(dirs[t]) > n {
			v.res.Add(scan.Finding{Code: CodeTopicQueueRange, Severity: scan.Warning, Path: "consumequeue/" + t, Repair: scan.RepairNone,
				Expected: fmt.Sprintf("queue ids < %d", n), Actual: fmt.Sprintf("queue id %d", dirs[t]-1),
				Message: fmt.Sprintf("topic %q has a queue dir beyond its readQueueNums/writeQueueNums (%d/%d): consumers never read it", t, tc.ReadQueueNums, tc.WriteQueueNums)})
		}
	}
	cfgNames := make([]string, 0, len(doc.TopicConfigTable))
	for t := range doc.TopicConfigTable {
		if _, ok := dirs[t]; !ok {
			cfgNames = append(cfgNames, t)
		}
	}
	sort.Strings(cfgNames)
	for _, t := range cfgNames {
		v.res.Add(scan.Finding{Code: CodeTopicNoQueueDir, Severity: scan.Info, Path: rel, Repair: scan.RepairNone,
			Message: fmt.Sprintf("topic %q is configured but has no consume queue dir (no messages yet)", t)})
	}
	return nil
}
