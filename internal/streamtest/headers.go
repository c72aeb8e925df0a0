package streamtest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// Headers091 renders an AMQP 0-9-1 header table the way the datasets'
// dump consumers wrote a delivery's headers (restart/dump-*.jsonl):
// timestamps as {"timestamp"}, strings that are not UTF-8 as
// {"str_hex"}, byte arrays as {"bin_hex"}, nested tables and arrays
// element by element.
func Headers091(t rfmt.Table) map[string]any {
	out := map[string]any{}
	for _, f := range t {
		out[f.Name] = value091(f.Value)
	}
	return out
}

func value091(v rfmt.FieldValue) any {
	if v.Type == 'T' {
		return map[string]any{"timestamp": v.V}
	}
	switch x := v.V.(type) {
	case []byte:
		if v.Type == 'x' {
			return map[string]any{"bin_hex": hex.EncodeToString(x)}
		}
		if !utf8.Valid(x) {
			return map[string]any{"str_hex": hex.EncodeToString(x)}
		}
		return string(x)
	case []rfmt.FieldValue:
		var a []any
		for _, e := range x {
			a = append(a, value091(e))
		}
		return a
	case rfmt.Table:
		return Headers091(x)
	}
	return v.V
}

// SameJSON reports whether a and b encode to the same JSON value (numbers
// compared as JSON numbers, map keys in any order).
func SameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	var u, w any
	json.Unmarshal(x, &u)
	json.Unmarshal(y, &w)
	return fmt.Sprint(u) == fmt.Sprint(w)
}
