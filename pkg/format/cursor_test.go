package format

import (
	"errors"
	"testing"
)

func TestCursorBounds(t *testing.T) {
	c := NewCursor([]byte{0, 1, 2, 3, 4, 5})
	if v := c.U32("a"); v != 0x00010203 {
		t.Fatalf("U32 = %#x", v)
	}
	if c.U32("b") != 0 || !c.Failed() {
		t.Fatal("read past end did not fail")
	}
	c.U8("c") // sticky: must not overwrite the first failure
	err := c.Err(100)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrShort) || ce.Field != "b" || ce.Offset != 104 {
		t.Fatalf("err = %#v", err)
	}
	if c.Take("neg", -1) != nil {
		t.Fatal("negative take returned data")
	}
}

func TestCursorTakeCapLimited(t *testing.T) {
	b := []byte{1, 2, 3, 4}
	c := NewCursor(b)
	p := c.Take("x", 2)
	p = append(p, 9)
	if b[2] != 3 {
		t.Fatal("append through Take clobbered the next field")
	}
	if err := WithPath(Corrupt(5, "f", ErrMagic), "a/b"); err.Error() != "a/b@5: f: unknown magic code" {
		t.Fatalf("Error() = %q", err.Error())
	}
}
