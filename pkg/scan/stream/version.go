package stream

import (
	"github.com/storectl/storectl/internal/storefile"
	"path/filepath"
	"regexp"
	"slices"
)

// flagAtom matches one feature flag name in a node's feature flags file
// (an Erlang list of atoms, quoted where needed: 'rabbitmq_4.0.0').
var flagAtom = regexp.MustCompile(`'[^']+'|[a-z][a-zA-Z0-9_@]*`)

// FeatureFlags reads the feature flags file the broker keeps beside a node
// dir (<mnesia base>/<node>-feature_flags: the flags enabled on the node),
// nil when there is none.
func FeatureFlags(node string) []string {
	b, err := storefile.ReadFileLimit(filepath.Join(filepath.Dir(node), filepath.Base(node)+"-feature_flags"), 1<<20) // a FIFO there must not block
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range flagAtom.FindAllString(string(b), -1) {
		if len(a) > 1 && a[0] == '\'' {
			a = a[1 : len(a)-1]
		}
		out = append(out, a)
	}
	return out
}

// VersionAssumption says, for a scan of node's streams given no broker
// version, which version's rules it applies and what the node's feature
// flags tell about the version that last ran it ("" when a version was
// given). The flags only bound the version: 4.0 refuses to start before
// every 3.13 flag is enabled, message_containers among them, and 3.11
// added stream_single_active_consumer.
func VersionAssumption(node, version string) string {
	if version != "" {
		return ""
	}
	a := "streams judged and converted as RabbitMQ " + DefaultVersion + " (no --broker-version)"
	ff := FeatureFlags(node)
	switch {
	case ff == nil:
	case slices.Contains(ff, "rabbitmq_4.0.0"):
		a += "; the node's feature flags say 4.x"
	case !slices.Contains(ff, "message_containers"):
		last := "3.x before 4.0"
		if !slices.Contains(ff, "stream_single_active_consumer") {
			last = "3.9 or 3.10"
		}
		a += "; but the node's feature flags (no message_containers) say it was last run by RabbitMQ " + last +
			": give --broker-version (3.x recovers, reads and converts stream messages differently)"
	}
	return a
}
