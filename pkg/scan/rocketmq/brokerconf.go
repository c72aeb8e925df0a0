package rocketmq

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
)

// BrokerConf holds the store layout keys of a broker's broker.conf (a
// Java properties file). Zero values mean "not set".
type BrokerConf struct {
	StorePathRootDir           string
	StorePathCommitLog         string
	MappedFileSizeCommitLog    int64
	MappedFileSizeConsumeQueue int64
	MaxHashSlotNum             int64
	MaxIndexNum                int64
	// Keys lists every key=value read, for the run record.
	Keys map[string]string
}

// ReadBrokerConf reads the layout keys from a broker.conf file.
func ReadBrokerConf(path string) (BrokerConf, error) {
	b, err := storefile.ReadFile(path)
	if err != nil {
		return BrokerConf{}, err
	}
	return ParseBrokerConf(b, path)
}

// ParseBrokerConf parses Java properties text: `key=value` or `key: value`
// lines, `#`/`!` comments. Unknown keys are kept in Keys and ignored.
func ParseBrokerConf(b []byte, name string) (BrokerConf, error) {
	c := BrokerConf{Keys: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			continue
		}
		k, v := strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		c.Keys[k] = v
		num := func(dst *int64) error {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil || x <= 0 {
				return fmt.Errorf("%s:%d: %s=%q is not a positive integer", name, n, k, v)
			}
			*dst = x
			return nil
		}
		var err error
		switch k {
		case "storePathRootDir":
			c.StorePathRootDir = v
		case "storePathCommitLog":
			c.StorePathCommitLog = v
		case "mappedFileSizeCommitLog":
			err = num(&c.MappedFileSizeCommitLog)
		case "mappedFileSizeConsumeQueue":
			err = num(&c.MappedFileSizeConsumeQueue)
		case "maxHashSlotNum":
			err = num(&c.MaxHashSlotNum)
		case "maxIndexNum":
			err = num(&c.MaxIndexNum)
		}
		if err != nil {
			return c, err
		}
	}
	return c, sc.Err()
}
