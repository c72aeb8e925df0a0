package rabbitmq

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// msgDecoded is one line of results/*/scan-decoded.jsonl (3.10 and 4.0).
type msgDecoded struct {
	File          string   `json:"file"`
	MsgID         string   `json:"msg_id"`
	Offset        int64    `json:"offset"`
	TotalSize     int64    `json:"total_size"`
	Exchange      *string  `json:"exchange"`
	RoutingKeys   []string `json:"routing_keys"`
	AMQPMessageID string   `json:"amqp_message_id"`
	Persistent    *bool    `json:"persistent"`
	IDMatches     *bool    `json:"id_matches"`
	BodySize      *int64   `json:"body_size"`
	BodySHA256    string   `json:"body_sha256"`
	PayloadSize   *int64   `json:"payload_size"`
	PayloadSHA256 string   `json:"payload_sha256"`
}

// msgDecodeAt frames and decodes the record at off.
func msgDecodeAt(t *testing.T, b []byte, off int64) (Entry, Message) {
	t.Helper()
	e, err := DecodeEntry(b[off:], off, DefaultMaxEntrySize)
	if err != nil || !e.WriteOK {
		t.Fatalf("@%d: %v", off, err)
	}
	m, err := DecodeMessage(e.Body, off+RDQHeaderLen)
	if err != nil {
		t.Fatalf("@%d: %v", off, err)
	}
	return e, m
}

func TestMessageScanDecoded(t *testing.T) {
	sets := []struct{ fixture, name, node string }{
		{"rabbitmq", "clean-shutdown", "rmqfix@localhost"},
		{"rabbitmq", "crash", "rmqfix@localhost"},
		{"rabbitmq", "crash-cqv2", "rmqfix@localhost"},
		{"rabbitmq", "crash-mid-write-confirmed", "rmqfix@localhost"},
		{"rabbitmq-4.0", "clean-shutdown", "rmq40@localhost"},
		{"rabbitmq-4.0", "crash", "rmq40@localhost"},
	}
	total := 0
	for _, s := range sets {
		root := rdqDataset(t, s.fixture, "datasets", s.name+".tar.gz")
		vh := rdqVhostDir(root, s.node)
		files := map[string][]byte{}
		for _, r := range testutil.ReadJSONL[msgDecoded](t, testutil.Testdata(s.fixture, "results", s.name, "scan-decoded.jsonl")) {
			rel := strings.Replace(r.File, "-", "/", 1) // 3.10: msg_store_persistent-9.rdq
			b, ok := files[rel]
			if !ok {
				var err error
				if b, err = os.ReadFile(filepath.Join(vh, rel)); err != nil {
					t.Fatal(err)
				}
				files[rel] = b
			}
			e, m := msgDecodeAt(t, b, r.Offset)
			where := fmt.Sprintf("%s/%s/%s@%d", s.fixture, s.name, r.File, r.Offset)
			size, sum := r.PayloadSize, r.PayloadSHA256
			if r.BodySize != nil {
				size, sum = r.BodySize, r.BodySHA256
			}
			switch {
			case hex.EncodeToString(e.MsgID[:]) != r.MsgID || e.TotalSize != r.TotalSize:
				t.Errorf("%s: frame id/size mismatch", where)
			case m.Properties == nil || m.Properties.MessageID == nil || *m.Properties.MessageID != r.AMQPMessageID:
				t.Errorf("%s: message_id %v, want %s", where, m.Properties, r.AMQPMessageID)
			case !reflect.DeepEqual(m.RoutingKeys, r.RoutingKeys):
				t.Errorf("%s: routing keys %q, want %q", where, m.RoutingKeys, r.RoutingKeys)
			case size == nil || m.PayloadSize != *size || hex.EncodeToString(m.PayloadSHA256[:]) != sum:
				t.Errorf("%s: payload %d %x, want %v %s", where, m.PayloadSize, m.PayloadSHA256, size, sum)
			case r.Exchange != nil && m.Exchange != *r.Exchange:
				t.Errorf("%s: exchange %q, want %q", where, m.Exchange, *r.Exchange)
			case r.Persistent != nil && m.Durable != *r.Persistent:
				t.Errorf("%s: durable %v", where, m.Durable)
			case r.IDMatches != nil && bytes.Equal(m.ID, e.MsgID[:]) != *r.IDMatches:
				t.Errorf("%s: term id %x vs frame id %x, oracle id_matches %v", where, m.ID, e.MsgID, *r.IDMatches)
			}
			wantRec := RecordMC
			if s.fixture == "rabbitmq" {
				wantRec = RecordBasicMessage
			}
			if m.Record != wantRec {
				t.Errorf("%s: record %s", where, m.Record)
			}
			total++
		}
	}
	t.Logf("%d scan-decoded records compared", total)
	if total != 3606 { // every line of the six scan-decoded.jsonl files
		t.Fatalf("only %d records compared", total)
	}
}

// msgExpected is the part of rabbitmq-mc/*.expected.jsonl compared here.
type msgExpected struct {
	Index       int             `json:"index"`
	Name        string          `json:"name"`
	Offset      int64           `json:"offset"`
	MsgID       string          `json:"msg_id"`
	RecordTag   string          `json:"record_tag"`
	Protocol    string          `json:"protocol"`
	Exchange    string          `json:"exchange"`
	RoutingKeys []string        `json:"routing_keys"`
	Durable     bool            `json:"durable"`
	Annotations json.RawMessage `json:"annotations"`
	Properties  json.RawMessage `json:"properties"`
	PayloadSize int64           `json:"payload_size"`
	PayloadSHA  string          `json:"payload_sha256"`
	Content     struct {
		ClassID       int64   `json:"class_id"`
		PropsHex      string  `json:"properties_bin_hex"`
		FragSizesRev  []int64 `json:"payload_fragment_sizes_rev"`
		FragmentCount int     `json:"payload_fragments"`
	} `json:"content"`
}

func TestMessageMCExpected(t *testing.T) {
	total := 0
	for _, v := range []string{"mc-3.13.7", "mc-4.1.8", "alt-otp25/mc-3.13.7", "alt-otp25/mc-4.1.8"} {
		b, err := os.ReadFile(testutil.Testdata("rabbitmq-mc", v+".rdq"))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range testutil.ReadJSONL[msgExpected](t, testutil.Testdata("rabbitmq-mc", v+".expected.jsonl")) {
			where := fmt.Sprintf("%s#%d %s", v, x.Index, x.Name)
			_, m := msgDecodeAt(t, b, x.Offset)
			var sizes []int64
			for _, f := range m.Content.FragmentsRev {
				sizes = append(sizes, int64(len(f)))
			}
			if x.Content.FragSizesRev == nil {
				x.Content.FragSizesRev = []int64{}
			}
			if sizes == nil {
				sizes = []int64{}
			}
			checks := []struct {
				what      string
				got, want any
			}{
				{"record", m.Record, x.RecordTag},
				{"protocol", m.Protocol, x.Protocol},
				{"exchange", m.Exchange, x.Exchange},
				{"routing_keys", m.RoutingKeys, x.RoutingKeys},
				{"durable", m.Durable, x.Durable},
				{"id", hex.EncodeToString(m.ID), x.MsgID},
				{"payload_size", m.PayloadSize, x.PayloadSize},
				{"payload_sha256", hex.EncodeToString(m.PayloadSHA256[:]), x.PayloadSHA},
				{"class_id", m.Content.ClassID, x.Content.ClassID},
				{"properties_bin", hex.EncodeToString(m.Content.PropertiesBin), x.Content.PropsHex},
				{"fragment sizes", sizes, x.Content.FragSizesRev},
				{"annotations", msgJSON(t, msgTermJSON(m.Annotations)), msgJSON(t, x.Annotations)},
				{"properties", msgJSON(t, msgPropsJSON(m.Properties)), msgJSON(t, x.Properties)},
			}
			for _, c := range checks {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s: %s = %v\nwant %v", where, c.what, c.got, c.want)
				}
			}
			total++
		}
	}
	if total != 68 {
		t.Fatalf("compared %d records, want 68", total)
	}
}

// msgJSON normalises a value through JSON (numbers kept exact).
func msgJSON(t *testing.T, v any) any {
	t.Helper()
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// msgBinJSON renders a binary like the oracle: printable UTF-8 as a string,
// anything else as {"hex": ...}.
func msgBinJSON(b []byte) any {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) }) {
		return string(b)
	}
	return map[string]string{"hex": hex.EncodeToString(b)}
}

// msgTermJSON renders a term the way expected.jsonl does.
func msgTermJSON(t etf.Term) any {
	switch v := t.(type) {
	case etf.Atom:
		switch v {
		case "undefined":
			return nil
		case "true":
			return true
		case "false":
			return false
		}
		return map[string]string{"atom": string(v)}
	case etf.Binary:
		return msgBinJSON(v)
	case int64:
		return v
	case float64:
		return v
	case etf.Nil:
		return []any{}
	case etf.List:
		out := []any{}
		for _, e := range v.Elems {
			out = append(out, msgTermJSON(e))
		}
		return out
	case etf.Tuple:
		out := []any{}
		for _, e := range v {
			out = append(out, msgTermJSON(e))
		}
		return map[string]any{"tuple": out}
	case etf.Map:
		out := map[string]any{}
		for _, e := range v {
			var k string
			switch kk := e.Key.(type) {
			case etf.Atom:
				k = string(kk)
			case etf.Binary:
				k = string(kk)
			default:
				k = fmt.Sprint(kk)
			}
			out[k] = msgTermJSON(e.Value)
		}
		return out
	}
	return fmt.Sprintf("unhandled %T", t)
}

func msgFieldJSON(v FieldValue) any {
	switch x := v.V.(type) {
	case []byte:
		return msgBinJSON(x)
	case Decimal:
		return map[string]any{"scale": x.Scale, "unscaled": x.Unscaled}
	case Table:
		return msgTableJSON(x)
	case []FieldValue:
		out := []any{}
		for _, e := range x {
			out = append(out, []any{FieldTypeName(e.Type), msgFieldJSON(e)})
		}
		return out
	}
	return v.V
}

func msgTableJSON(t Table) any {
	out := []any{}
	for _, f := range t {
		out = append(out, []any{f.Name, FieldTypeName(f.Value.Type), msgFieldJSON(f.Value)})
	}
	return out
}

func msgPropsJSON(p *BasicProperties) any {
	out := map[string]any{
		"content_type": p.ContentType, "content_encoding": p.ContentEncoding, "delivery_mode": p.DeliveryMode,
		"priority": p.Priority, "correlation_id": p.CorrelationID, "reply_to": p.ReplyTo,
		"expiration": p.Expiration, "message_id": p.MessageID, "timestamp": p.Timestamp, "type": p.Type,
		"user_id": p.UserID, "app_id": p.AppID, "cluster_id": p.ClusterID, "headers": nil,
	}
	if p.Headers != nil {
		out["headers"] = msgTableJSON(p.Headers)
	}
	return out
}

func TestDecodeBasicPropertiesErrors(t *testing.T) {
	tests := []struct {
		name      string
		in        []byte
		wantField string
		wantOff   int64
		wantErr   error
	}{
		{"empty", nil, "flags", 100, format.ErrShort},
		{"continuation", []byte{0x00, 0x01}, "flags", 100, format.ErrUnsupported},
		{"short content type", []byte{0x80, 0, 5, 'a'}, "content_type", 103, format.ErrShort},
		{"table too long", []byte{0x20, 0, 0, 0, 0, 9}, "headers", 106, format.ErrShort},
		{"bad header type", []byte{0x20, 0, 0, 0, 0, 3, 1, 'k', 'Z'}, "header type", 108, format.ErrInvalid},
		{"nested short", []byte{0x20, 0, 0, 0, 0, 7, 1, 'k', 'F', 0, 0, 0, 9}, "table", 113, format.ErrShort},
		{"trailing", []byte{0x10, 0, 2, 7}, "properties_bin", 103, format.ErrInvalid},
	}
	for _, tt := range tests {
		_, err := DecodeBasicProperties(tt.in, 100)
		var ce *format.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) || ce.Field != tt.wantField || ce.Offset != tt.wantOff {
			t.Errorf("%s: err = %v, want %s@%d", tt.name, err, tt.wantField, tt.wantOff)
		}
	}
}

func TestDecodeMessageErrors(t *testing.T) {
	b := rdqTestFile(t)
	body := append([]byte(nil), b[24:173]...)
	// Corrupt the flags word of properties_bin (100002 -> 010002): continuation bit.
	i := bytes.Index(body, []byte{0x6d, 0, 0, 0, 3, 0x10, 0x00, 0x02})
	if i < 0 {
		t.Fatal("properties_bin not found")
	}
	body[i+5], body[i+6] = 0, 1
	_, err := DecodeMessage(body, 1000)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.Field != "flags" || ce.Offset != 1000+int64(i+5) {
		t.Fatalf("err = %v", err)
	}
	if _, err := DecodeMessage([]byte{131, 104, 1, 119, 1, 'x'}, 7); !errors.As(err, &ce) || ce.Field != "record" || ce.Offset != 7 {
		t.Fatalf("err = %v", err)
	}
	if _, err := DecodeMessage([]byte{131, 106, 0}, 7); !errors.As(err, &ce) || ce.Field != "body" || ce.Offset != 9 {
		t.Fatalf("err = %v", err)
	}
}

func FuzzMessage(f *testing.F) {
	for name, b := range mcTestBlobs(f) {
		if strings.HasPrefix(name, "blobs/4.1.8") && len(b) < 8192 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b, 0)
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("not a CorruptError: %v", err)
			}
			return
		}
		if m.Content != nil && m.PayloadSize > int64(len(b)) {
			t.Fatalf("payload %d longer than body %d", m.PayloadSize, len(b))
		}
	})
}

// mcTestBlobs returns every term_to_binary blob of the rabbitmq-mc fixture
// (OTP 27 and OTP 25 encoders, 3.13.7 and 4.1.8).
func mcTestBlobs(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, dir := range []string{"blobs/3.13.7", "blobs/4.1.8", "alt-otp25/blobs/3.13.7", "alt-otp25/blobs/4.1.8"} {
		paths, err := filepath.Glob(testutil.Testdata("rabbitmq-mc", dir, "*.bin"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no blobs in %s: %v", dir, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[dir+"/"+filepath.Base(p)] = b
		}
	}
	return out
}
