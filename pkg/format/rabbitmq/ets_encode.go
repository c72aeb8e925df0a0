package rabbitmq

// Writing ets:tab2file dumps: header, info tuple, objects, end marker.

import "encoding/binary"

func etsEncode(name, typ string, objs []Term, o ETSEncodeOptions) ([]byte, error) {
	info := o.Info
	if info == nil {
		info = etsDefaultInfo(name, typ, o.Node, o.Atoms)
	}
	info = etsWithSize(info, int64(len(objs)))
	out := append(append([]byte{}, etsLogMagic...), etsClosed...)
	items := append(append([]Term{info}, objs...),
		List{Elems: []Term{etsEndOfData, List{Elems: []Term{Tuple{Atom("count"), int64(len(objs))}}, Tail: Nil{}}}, Tail: Nil{}})
	for _, t := range items {
		etf, err := EncodeTerm(t, o.Atoms)
		if err != nil {
			return nil, err
		}
		out = etsAppendItem(out, etf)
	}
	return out, nil
}

// etsWithSize returns a copy of the info tuple with {size, N}.
func etsWithSize(info Term, n int64) Term {
	t, ok := info.(Tuple)
	if !ok {
		return info
	}
	c := append(Tuple(nil), t...)
	for i, e := range c {
		if kv, ok := e.(Tuple); ok && len(kv) == 2 && kv[0] == Atom("size") {
			c[i] = Tuple{Atom("size"), n}
		}
	}
	return c
}

// etsDefaultInfo builds an info tuple with the keys, in the order, that
// tab2file wrote in the fixtures (OTP 25 and 27). The id reference and
// owner pid are placeholders (all-zero numbers on Node); ets:file2tab
// creates a new table owned by the caller and, as far as known, does not
// use them. memory is 0 for the same reason.
func etsDefaultInfo(name, typ, node string, atoms AtomEncoding) Term {
	if node == "" {
		node = "rabbit@localhost"
	}
	nodeAtom, _ := etfAppendAtom(nil, node, atoms)
	ref := append([]byte{etfNewerReference, 0, 3}, nodeAtom...)
	ref = append(ref, make([]byte, 4+3*4)...)
	pid := append([]byte{etfNewPid}, nodeAtom...)
	pid = binary.BigEndian.AppendUint32(append(pid, make([]byte, 8)...), 0)
	kv := func(k string, v Term) Term { return Tuple{Atom(k), v} }
	f := Atom("false")
	return Tuple{
		kv("id", Opaque{Tag: etfNewerReference, Raw: ref}),
		kv("decentralized_counters", f), kv("read_concurrency", f), kv("write_concurrency", f),
		kv("compressed", f), kv("memory", int64(0)),
		kv("owner", Opaque{Tag: etfNewPid, Raw: pid}),
		kv("heir", Atom("none")), kv("name", Atom(name)), kv("size", int64(0)),
		kv("node", Atom(node)), kv("named_table", f), kv("type", Atom(typ)),
		kv("keypos", int64(2)), kv("protection", Atom("public")),
		kv("major_version", int64(1)), kv("minor_version", int64(0)),
		kv("extended_info", List{Elems: []Term{Atom("object_count")}, Tail: Nil{}}),
	}
}
