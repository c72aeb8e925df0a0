package ra

// A replica's <UId>/config file: the ra server config map as Erlang term
// text (ra_log:write_config, io_lib:format("~p.~n")), written through
// config.tmp and a rename. RabbitMQ's quorum queues put there the server
// id {ClusterName, Node}, the uid, the friendly name ("queue 'q' in vhost
// '/'"), the initial members and the machine {module, rabbit_fifo, Conf}
// whose Conf holds queue_resource {resource, VHost, queue, Name}.

import (
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Config is what storectl reads from a config file.
type Config struct {
	ID             ServerID
	UID            string
	ClusterName    string
	FriendlyName   string
	InitialMembers []ServerID
	Membership     string // voter, promotable, ... ("" before ra 2.7)
	MachineModule  string // rabbit_fifo for a quorum queue
	MachineConfig  etf.Map
	// VHost and Queue are the queue's names from queue_resource (or
	// metrics_key); empty when the config is not a quorum queue's.
	VHost, Queue string
	// MachineVersion is the machine_version key when present (ra writes
	// it only in some versions); -1 otherwise.
	MachineVersion int64
	// SystemDataDir and SystemWALDir are the data_dir and wal_data_dir of
	// the system_config that ra before 2.4.2 (RabbitMQ 3.10.0-3.10.13)
	// wrote into the file, and read the member's log from at its next
	// start (ra commit 6395b385); "" when the file has none.
	SystemDataDir, SystemWALDir string
	Term                        etf.Term
}

// ParseConfig parses a config file.
func ParseConfig(b []byte) (Config, error) {
	c := Config{MachineVersion: -1}
	terms, err := etf.ParseText(b)
	if err != nil {
		return c, err
	}
	if len(terms) != 1 {
		return c, format.Corrupt(0, "config", format.ErrInvalid)
	}
	m, ok := terms[0].(etf.Map)
	if !ok {
		return c, format.Corrupt(0, "config", format.ErrInvalid)
	}
	c.Term = m
	if v, ok := MapGet(m, "id"); ok {
		c.ID, _ = ServerIDFromTerm(v)
	}
	if v, ok := MapGet(m, "uid"); ok {
		if b, ok := termBytes(v); ok {
			c.UID = string(b)
		}
	}
	if v, ok := MapGet(m, "cluster_name"); ok {
		c.ClusterName = textOf(v)
	}
	if v, ok := MapGet(m, "friendly_name"); ok {
		c.FriendlyName = textOf(v)
	}
	if v, ok := MapGet(m, "membership"); ok {
		c.Membership = textOf(v)
	}
	if v, ok := MapGet(m, "initial_members"); ok {
		c.InitialMembers = clusterIDs(v)
	}
	if v, ok := MapGet(m, "machine_version"); ok {
		if n, ok := v.(int64); ok {
			c.MachineVersion = n
		}
	}
	if v, ok := MapGet(m, "machine"); ok {
		if t, ok := v.(etf.Tuple); ok && len(t) == 3 && t[0] == etf.Atom("module") {
			c.MachineModule = textOf(t[1])
			c.MachineConfig, _ = t[2].(etf.Map)
		}
	}
	if v, ok := MapGet(m, "system_config"); ok {
		if sc, ok := v.(etf.Map); ok {
			if d, ok := MapGet(sc, "data_dir"); ok {
				c.SystemDataDir = textOf(d)
			}
			if d, ok := MapGet(sc, "wal_data_dir"); ok {
				c.SystemWALDir = textOf(d)
			}
		}
	}
	if r, ok := MapGet(c.MachineConfig, "queue_resource"); ok {
		c.VHost, c.Queue, _ = QueueResource(r)
	} else if r, ok := MapGet(m, "metrics_key"); ok {
		c.VHost, c.Queue, _ = QueueResource(r)
	}
	if c.UID == "" {
		return c, format.Corrupt(0, "uid", format.ErrInvalid)
	}
	return c, nil
}

// QueueResource reads {resource, VHost, queue, Name}.
func QueueResource(t etf.Term) (vhost, name string, ok bool) {
	r, isTup := t.(etf.Tuple)
	if !isTup || len(r) != 4 || r[0] != etf.Atom("resource") || r[2] != etf.Atom("queue") {
		return "", "", false
	}
	v, ok1 := termBytes(r[1])
	n, ok2 := termBytes(r[3])
	return string(v), string(n), ok1 && ok2
}

// textOf renders an atom, binary or string term as text.
func textOf(t etf.Term) string {
	switch v := t.(type) {
	case etf.Atom:
		return string(v)
	case etf.Binary:
		return string(v)
	case etf.String:
		// Latin-1 code points
		rs := make([]rune, len(v))
		for i, c := range v {
			rs[i] = rune(c)
		}
		return string(rs)
	case etf.List:
		rs := make([]rune, 0, len(v.Elems))
		for _, e := range v.Elems {
			n, ok := e.(int64)
			if !ok {
				return ""
			}
			rs = append(rs, rune(n))
		}
		return string(rs)
	}
	return ""
}

// DeliveryLimit reads the machine config's delivery_limit: -1 when unset
// or undefined (RabbitMQ 4.0 sets 20 by default; a negative value in the
// config also means none).
func (c *Config) DeliveryLimit() int64 {
	v, ok := MapGet(c.MachineConfig, "delivery_limit")
	if !ok {
		return -1
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return -1
	}
	return n
}
