package rabbitmq

// Writing ets:tab2file dumps: header, info tuple, objects, end marker.

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format/etf"
)

func etsEncode(name, typ string, objs []etf.Term, o ETSEncodeOptions) ([]byte, error) {
	info := o.Info
	if info == nil {
		info = etsDefaultInfo(name, typ, o.Node, o.Atoms)
	}
	info = etsWithSize(info, int64(len(objs)))
	out := append(append([]byte{}, etsLogMagic...), etsClosed...)
	items := append(append([]etf.Term{info}, objs...),
		etf.List{Elems: []etf.Term{etsEndOfData, etf.List{Elems: []etf.Term{etf.Tuple{etf.Atom("count"), int64(len(objs))}}, Tail: etf.Nil{}}}, Tail: etf.Nil{}})
	for _, t := range items {
		etf, err := etf.EncodeTerm(t, o.Atoms)
		if err != nil {
			return nil, err
		}
		out = etsAppendItem(out, etf)
	}
	return out, nil
}

// etsWithSize returns a copy of the info tuple with {size, N}.
func etsWithSize(info etf.Term, n int64) etf.Term {
	t, ok := info.(etf.Tuple)
	if !ok {
		return info
	}
	c := append(etf.Tuple(nil), t...)
	for i, e := range c {
		if kv, ok := e.(etf.Tuple); ok && len(kv) == 2 && kv[0] == etf.Atom("size") {
			c[i] = etf.Tuple{etf.Atom("size"), n}
		}
	}
	return c
}

// etsDefaultInfo builds an info tuple with the keys, in the order, that
// tab2file wrote in the fixtures (OTP 25 and 27). The id reference and
// owner pid are placeholders (all-zero numbers on Node); ets:file2tab
// creates a new table owned by the caller and, as far as known, does not
// use them. memory is 0 for the same reason.
func etsDefaultInfo(name, typ, node string, atoms etf.AtomEncoding) etf.Term {
	if node == "" {
		node = "rabbit@localhost"
	}
	nodeAtom, _ := etf.AppendAtom(nil, node, atoms)
	ref := append([]byte{etf.TagNewerReference, 0, 3}, nodeAtom...)
	ref = append(ref, make([]byte, 4+3*4)...)
	pid := append([]byte{etf.TagNewPid}, nodeAtom...)
	pid = binary.BigEndian.AppendUint32(append(pid, make([]byte, 8)...), 0)
	kv := func(k string, v etf.Term) etf.Term { return etf.Tuple{etf.Atom(k), v} }
	f := etf.Atom("false")
	return etf.Tuple{
		kv("id", etf.Opaque{Tag: etf.TagNewerReference, Raw: ref}),
		kv("decentralized_counters", f), kv("read_concurrency", f), kv("write_concurrency", f),
		kv("compressed", f), kv("memory", int64(0)),
		kv("owner", etf.Opaque{Tag: etf.TagNewPid, Raw: pid}),
		kv("heir", etf.Atom("none")), kv("name", etf.Atom(name)), kv("size", int64(0)),
		kv("node", etf.Atom(node)), kv("named_table", f), kv("type", etf.Atom(typ)),
		kv("keypos", int64(2)), kv("protection", etf.Atom("public")),
		kv("major_version", int64(1)), kv("minor_version", int64(0)),
		kv("extended_info", etf.List{Elems: []etf.Term{etf.Atom("object_count")}, Tail: etf.Nil{}}),
	}
}
