package etf

import (
	"reflect"
	"testing"
)

func TestProperList(t *testing.T) {
	for _, c := range []struct {
		in   Term
		want []Term
		ok   bool
	}{
		{Nil{}, nil, true},
		{List{Elems: []Term{int64(1), Atom("a")}, Tail: Nil{}}, []Term{int64(1), Atom("a")}, true},
		{String("hi"), []Term{int64('h'), int64('i')}, true},
		{List{Elems: []Term{int64(1)}, Tail: int64(2)}, nil, false}, // improper [1|2]
		{Atom("x"), nil, false},
	} {
		got, ok := ProperList(c.in)
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ProperList(%#v) = %#v, %v; want %#v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
