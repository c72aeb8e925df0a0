package rmq5x

import (
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

type (
	rmqOffsetTable = rmq.OffsetTable
	queueOffset    = rmq.QueueOffset
)

const (
	consumerOffsetFile = rmq.ConsumerOffsetFile
	lmqOffsetFile      = rmq.LMQConsumerOffsetFile
	delayOffsetFile    = rmq.DelayOffsetFile
)

var (
	decodeConsumer = rmq.DecodeConsumerOffsets
	decodeDelay    = rmq.DecodeDelayOffsets
	setOffsets     = rmq.SetOffsets
)

func readRel(root, rel string) ([]byte, error) {
	return storefile.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
}
