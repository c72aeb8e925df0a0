package rabbitmq

// Directory names and the small text files of a vhost and queue dir (§1.2):
//
//	msg_stores/vhosts/<VHostDirName(vhost)>/.config         {segment_entry_count, N}.
//	msg_stores/vhosts/<...>/queues/<QueueDirName(v, q)>/.queue_name
//	                                    VHOST: <v>\nQUEUE: <q>\n[INDEX: v2\n]
//
// Sources: rabbit_vhost.erl (dir/1, ensure_config_file/1, read_config/1),
// rabbit_queue_index.erl and rabbit_classic_queue_index_v2.erl
// (queue_name_to_dir_name/1, ensure_queue_name_stub_file/2).

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/format"
)

// LegacySegmentEntryCount is the v1 segment entry count RabbitMQ uses
// when the vhost has no .config file (LEGACY_INDEX_SEGMENT_ENTRY_COUNT).
const LegacySegmentEntryCount = 16384

// MaxV1SegmentEntryCount bounds segment_entry_count: the v1 segment
// format stores RelSeq in 14 bits, so no larger value can be addressed.
const MaxV1SegmentEntryCount = 1 << 14

// namesMaxTextFile bounds .config and .queue_name parsing; the broker
// writes a few dozen bytes, vhost and queue names are at most 255 bytes.
const namesMaxTextFile = 64 << 10

// VHostDirName returns the directory name RabbitMQ uses for a vhost:
// MD5 of the raw name, as an unsigned 128-bit big-endian integer, in
// base 36 with digits 0-9A-Z and no zero padding (rabbit_vhost:dir/1).
func VHostDirName(vhost string) string { return namesBase36MD5([]byte(vhost)) }

// QueueDirName returns the queue index directory name of a classic queue:
// the same encoding of MD5("queue" ++ vhost ++ queue).
func QueueDirName(vhost, queue string) string {
	return namesBase36MD5([]byte("queue" + vhost + queue))
}

func namesBase36MD5(b []byte) string {
	sum := md5.Sum(b)
	return strings.ToUpper(new(big.Int).SetBytes(sum[:]).Text(36))
}

// QueueName is the content of a queue dir's .queue_name stub file.
type QueueName struct {
	VHost   string
	Name    string
	IndexV2 bool // "INDEX: v2" line present (written by the v2 index)
}

// ParseQueueName parses a .queue_name file:
// "VHOST: <vhost>\nQUEUE: <name>\n" optionally followed by "INDEX: v2\n".
// Names may contain any byte but a newline.
func ParseQueueName(b []byte) (QueueName, error) {
	var q QueueName
	if len(b) > namesMaxTextFile {
		return q, format.Corrupt(0, "queueName", format.ErrTooLarge)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	off := 0
	field := func(i int, prefix string) (string, bool) {
		if i >= len(lines) {
			return "", false
		}
		l := lines[i]
		if !bytes.HasPrefix(l, []byte(prefix)) || !bytes.HasSuffix(l, []byte("\n")) {
			return "", false
		}
		return string(l[len(prefix) : len(l)-1]), true
	}
	v, ok := field(0, "VHOST: ")
	if !ok {
		return q, format.Corrupt(0, "vhost", format.ErrInvalid)
	}
	off += len(lines[0])
	n, ok := field(1, "QUEUE: ")
	if !ok {
		return q, format.Corrupt(int64(off), "queue", format.ErrInvalid)
	}
	off += len(lines[1])
	q.VHost, q.Name = v, n
	rest := b[off:]
	switch {
	case len(rest) == 0:
	case bytes.Equal(rest, []byte("INDEX: v2\n")):
		q.IndexV2 = true
	default:
		return q, format.Corrupt(int64(off), "index", format.ErrInvalid)
	}
	return q, nil
}

// ParseVHostConfig reads segment_entry_count from a vhost .config file,
// a sequence of Erlang terms "{Key, Value}." with %-comments, as
// file:consult/1 would. It returns LegacySegmentEntryCount when the key
// is absent (rabbit_vhost:read_config/1 default).
func ParseVHostConfig(b []byte) (int, error) {
	if len(b) > namesMaxTextFile {
		return 0, format.Corrupt(0, "config", format.ErrTooLarge)
	}
	count := LegacySegmentEntryCount
	pos := 0
	for {
		pos = namesSkipSpace(b, pos)
		if pos >= len(b) {
			return count, nil
		}
		end := bytes.IndexByte(b[pos:], '.')
		if end < 0 {
			return 0, format.Corrupt(int64(pos), "term", format.ErrShort)
		}
		key, val, err := namesParsePair(b[pos:pos+end], int64(pos))
		if err != nil {
			return 0, err
		}
		if key == "segment_entry_count" {
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 || n > MaxV1SegmentEntryCount {
				return 0, format.Corrupt(int64(pos), "segment_entry_count", format.ErrInvalid)
			}
			count = n
		}
		pos += end + 1
	}
}

// namesSkipSpace skips whitespace and %-comments up to the end of line.
func namesSkipSpace(b []byte, pos int) int {
	for pos < len(b) {
		switch c := b[pos]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			pos++
		case c == '%':
			nl := bytes.IndexByte(b[pos:], '\n')
			if nl < 0 {
				return len(b)
			}
			pos += nl + 1
		default:
			return pos
		}
	}
	return pos
}

// namesParsePair parses "{atom, value}" (surrounding space allowed) and
// returns the atom and the raw value text.
func namesParsePair(t []byte, base int64) (string, string, error) {
	s := strings.TrimSpace(string(t))
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return "", "", format.Corrupt(base, "term", format.ErrInvalid)
	}
	parts := strings.SplitN(s[1:len(s)-1], ",", 2)
	if len(parts) != 2 {
		return "", "", format.Corrupt(base, "term", format.ErrInvalid)
	}
	key := strings.TrimSpace(parts[0])
	if key == "" || !namesIsAtom(key) {
		return "", "", format.Corrupt(base, "key", fmt.Errorf("%w: %q", format.ErrInvalid, key))
	}
	return key, strings.TrimSpace(parts[1]), nil
}

func namesIsAtom(s string) bool {
	if s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@') {
			return false
		}
	}
	return true
}
