package rocketmq

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// Record is one valid commitlog message as handed to scan.Options.Records.
// Its JSON names are those of docs/cli.md ("record"); the report layer
// adds "type". Hosts are "ip:port" with IPv6 in brackets (RFC 5952).
type Record struct {
	Path             string            `json:"path"`
	Offset           int64             `json:"offset"`
	Size             int64             `json:"size"`
	MsgID            string            `json:"msg_id"`
	PhyOffset        int64             `json:"phy_offset"`
	StoredPhyOffset  int64             `json:"stored_phy_offset"`
	Topic            string            `json:"topic"`
	QueueID          int32             `json:"queue_id"`
	QueueOffset      int64             `json:"queue_offset"`
	SysFlag          int32             `json:"sys_flag"`
	Flag             int32             `json:"flag"`
	TagsCode         string            `json:"tags_code"`
	Keys             string            `json:"keys"`
	Tags             string            `json:"tags"`
	UniqKey          string            `json:"uniq_key"`
	BornHost         string            `json:"born_host"`
	StoreHost        string            `json:"store_host"`
	BornTimestamp    int64             `json:"born_timestamp"`
	StoreTimestamp   int64             `json:"store_timestamp"`
	BodyCRC          string            `json:"body_crc"`
	BodySize         int               `json:"body_size"`
	BodySHA256       string            `json:"body_sha256"`
	Properties       map[string]string `json:"properties"`
	ReconsumeTimes   int32             `json:"reconsume_times"`
	PreparedTxOffset int64             `json:"prepared_tx_offset"`
	Version          int               `json:"version"`            // 1 or 2 (magic V1/V2)
	PropCRC          string            `json:"prop_crc,omitempty"` // verified __CRC32# value, when present
	// PropertiesRaw is the properties text as stored (0x01/0x02 separators).
	PropertiesRaw string `json:"-"`
}

// NewRecord builds the Record of a valid message m at pos in the file rel
// whose first byte is at physical offset base.
func NewRecord(m *rmq.Message, rel string, base, pos int64) Record {
	sum := sha256.Sum256(m.Body)
	r := Record{
		Path: rel, Offset: pos, Size: int64(m.TotalSize), MsgID: m.MsgID(),
		PhyOffset: base + pos, StoredPhyOffset: m.PhysicalOffset,
		Topic: string(m.Topic), QueueID: m.QueueID, QueueOffset: m.QueueOffset,
		SysFlag: m.SysFlag, Flag: m.Flag, TagsCode: strconv.FormatInt(m.TagsCode(), 10),
		Keys: m.Keys(), Tags: m.Tags(), UniqKey: m.UniqKey(),
		BornHost: m.BornHost.String(), StoreHost: m.StoreHost.String(),
		BornTimestamp: m.BornTimestamp, StoreTimestamp: m.StoreTimestamp,
		BodyCRC: strconv.FormatInt(int64(m.BodyCRC), 10), BodySize: len(m.Body),
		BodySHA256: hex.EncodeToString(sum[:]), Properties: rmq.ParseProperties(m.Properties),
		ReconsumeTimes: m.ReconsumeTimes, PreparedTxOffset: m.PreparedTransactionOffset,
		Version: m.Version(), PropertiesRaw: string(m.Properties),
	}
	if p := m.PropCRC(); p.Present && p.OK {
		r.PropCRC = strconv.FormatInt(p.Stored, 10)
	}
	return r
}
