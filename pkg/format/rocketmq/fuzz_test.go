package rocketmq

import (
	"bytes"
	"errors"
	"net/netip"
	"path"
	"reflect"
	"testing"
	"unsafe"

	"github.com/storectl/storectl/pkg/format"
)

// fixtureRecords returns a few real records from the broker fixture.
func fixtureRecords(f testing.TB) [][]byte {
	root, lines := loadFixture(f)
	var out [][]byte
	files := map[string][]byte{}
	for _, l := range lines {
		if (l.Kind != "msg" && l.Kind != "blank") || len(out) > 40 {
			continue
		}
		b, ok := files[l.File]
		if !ok {
			b = file(f, root, path.Join("commitlog", l.File))
			files[l.File] = b
		}
		n := l.Total
		if l.Kind == "blank" {
			n = BlankSize
		}
		out = append(out, b[l.Pos:l.Pos+n])
	}
	return out
}

func mustCorrupt(t *testing.T, err error) {
	var ce *format.CorruptError
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("error is not *CorruptError: %v", err)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, r := range fixtureRecords(f) {
		f.Add(r)
	}
	f.Add(workedExample(f))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b, 0, DefaultMaxRecordSize)
		mustCorrupt(t, err)
		if err != nil {
			return
		}
		if !m.IsBlank() && int(m.TotalSize) > len(b) {
			t.Fatal("accepted entry longer than input")
		}
		mustCorrupt(t, m.Verify())
		_ = m.MsgID()
		_ = m.TagsCode()
		_ = m.PropCRC()
		_ = m.InnerNum()
	})
}

func FuzzProperties(f *testing.F) {
	for _, r := range fixtureRecords(f) {
		if m, err := DecodeMessage(r, 0, 0); err == nil {
			f.Add(m.Properties)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := ParseProperties(b)
		for k, v := range p {
			if k == "" || v == "" {
				t.Fatal("empty key or value kept")
			}
			if lv, ok := LookupProperty(b, k); !ok || string(lv) != v {
				t.Fatalf("lookup %q = %q, parse = %q", k, lv, v)
			}
		}
	})
}

func FuzzCQUnit(f *testing.F) {
	root, _ := loadFixture(f)
	b := file(f, root, "consumequeue/TopicA/0/00000000000000000000")
	f.Add(b[:CQUnitSize])
	f.Add(b[:7])
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeCQUnit(b, 0)
		mustCorrupt(t, err)
		if w, werr := decodeCQUnitFields(b, 0); w != u || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("DecodeCQUnit %+v, %v; field by field %+v, %v", u, err, w, werr)
		}
		_ = u.Valid() && u.IsPlaceholder() && u.IsExtAddress()
		if err == nil && !bytes.Equal(AppendCQUnit(nil, u), b[:CQUnitSize]) {
			t.Fatalf("AppendCQUnit(%+v) = %x, decoded from %x", u, AppendCQUnit(nil, u), b[:CQUnitSize])
		}
	})
}

func FuzzIndex(f *testing.F) {
	root, lines := loadFixture(f)
	for _, l := range lines {
		if l.Kind == "index_header" {
			b := file(f, root, path.Join("index", l.File))
			f.Add(b[:IndexHeaderSize+IndexEntrySize], int64(len(b)))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		h, err := DecodeIndexHeader(b, 0)
		mustCorrupt(t, err)
		if err == nil && !bytes.Equal(AppendIndexHeader(nil, h), b[:IndexHeaderSize]) {
			t.Fatalf("AppendIndexHeader(%+v) = %x, decoded from %x", h, AppendIndexHeader(nil, h), b[:IndexHeaderSize])
		}
		e, err := DecodeIndexEntry(b, 0)
		mustCorrupt(t, err)
		if err == nil && !bytes.Equal(AppendIndexEntry(nil, e), b[:IndexEntrySize]) {
			t.Fatalf("AppendIndexEntry(%+v) = %x, decoded from %x", e, AppendIndexEntry(nil, e), b[:IndexEntrySize])
		}
		slot, err := DecodeIndexSlot(b, 0)
		mustCorrupt(t, err)
		if err == nil && !bytes.Equal(AppendIndexSlot(nil, slot), b[:IndexSlotSize]) {
			t.Fatalf("AppendIndexSlot(%d) = %x, decoded from %x", slot, AppendIndexSlot(nil, slot), b[:IndexSlotSize])
		}
		if err != nil && len(b) >= IndexSlotSize {
			t.Fatalf("DecodeIndexSlot of %d bytes: %v", len(b), err)
		}
		if l, err := IndexLayoutFromSize(size, 0); err == nil && l.Size() != size {
			t.Fatalf("layout %+v does not give size %d", l, size)
		}
	})
}

func FuzzCheckpoint(f *testing.F) {
	root, _ := loadFixture(f)
	f.Add(file(f, root, "checkpoint")[:CheckpointSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := DecodeCheckpoint(b, 0)
		mustCorrupt(t, err)
	})
}

func FuzzFileName(f *testing.F) {
	f.Add("00000000000000262144")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseFileName(s); err == nil && FormatFileName(v) != s {
			t.Fatalf("%q -> %d -> %q", s, v, FormatFileName(v))
		}
	})
}

// FuzzDecodeMessageInto: the one-pass decoder gives what DecodeMessage
// gives (every field, slice bounds and capacities, the error) on any
// input, also over a Message holding an earlier record, and its
// mutations of real records (lengths that do not add up, IPv6 flags).
func FuzzDecodeMessageInto(f *testing.F) {
	for _, r := range fixtureRecords(f) {
		f.Add(r, uint16(0), byte(0))
		f.Add(r, uint16(36+3), byte(0x30)) // IPv6 born and store host flags
		f.Add(r, uint16(84), byte(0xff))   // a body length byte
		f.Add(append(append([]byte(nil), r...), 1, 2, 3), uint16(len(r)-1), byte(7))
	}
	f.Add(workedExample(f), uint16(0), byte(0))
	f.Add([]byte{}, uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, b []byte, at uint16, x byte) {
		if int(at) < len(b) {
			b = append([]byte(nil), b...)
			b[at] ^= x
		}
		want, werr := DecodeMessage(b, 77, 0)
		got := dirtyMessage(t)
		gerr := DecodeMessageInto(&got, b, 77, 0)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("error %v, DecodeMessage %v", gerr, werr)
		}
		sameMessage(t, &got, &want)
	})
}

// TestDecodeIntoOverwritesEveryField decodes the fixture records (the
// fuzz seeds: fixtureRecords' first 41) into a Message whose every field
// holds something else: the one-pass decoder assigns field by field, and
// one it forgets keeps the old value.
func TestDecodeIntoOverwritesEveryField(t *testing.T) {
	recs := fixtureRecords(t)
	if len(recs) == 0 {
		t.Fatal("no fixture records")
	}
	for i, r := range recs {
		want, werr := DecodeMessage(r, 77, 0)
		got := dirtyMessage(t)
		if gerr := DecodeMessageInto(&got, r, 77, 0); (werr == nil) != (gerr == nil) {
			t.Fatalf("record %d: error %v, DecodeMessage %v", i, gerr, werr)
		}
		sameMessage(t, &got, &want)
	}
}

// dirtyMessage is a Message with every field, exported or not, set to a
// non-zero value (a field added later included).
func dirtyMessage(t testing.TB) Message {
	var m Message
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(7)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(7)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(netip.Addr{}) {
				v.Set(reflect.ValueOf(netip.MustParseAddr("10.9.8.7")))
				return
			}
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		default:
			t.Fatalf("dirtyMessage: no value for a %s field", v.Type())
		}
	}
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		fill(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()) // unexported fields too
	}
	return m
}

func sameMessage(t *testing.T, got, want *Message) {
	t.Helper()
	g, w := *got, *want
	for _, s := range []struct {
		name string
		g, w []byte
	}{{"body", g.Body, w.Body}, {"topic", g.Topic, w.Topic}, {"properties", g.Properties, w.Properties}, {"raw", g.Raw, w.Raw}} {
		if !bytes.Equal(s.g, s.w) || len(s.g) != len(s.w) || cap(s.g) != cap(s.w) || (s.g == nil) != (s.w == nil) ||
			len(s.g) > 0 && &s.g[0] != &s.w[0] {
			t.Fatalf("%s: %q (cap %d), DecodeMessage %q (cap %d)", s.name, s.g, cap(s.g), s.w, cap(s.w))
		}
	}
	g.Body, g.Topic, g.Properties, g.Raw = nil, nil, nil, nil
	w.Body, w.Topic, w.Properties, w.Raw = nil, nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("decoded %+v\nDecodeMessage %+v", g, w)
	}
}
