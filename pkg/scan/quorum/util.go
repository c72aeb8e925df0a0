package quorum

import (
	"encoding/base64"
	"errors"
	"os"
	"unicode/utf8"

	"github.com/storectl/storectl/internal/crc32x"
	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// errNotRegular is openRegular's and readRegular's refusal of a symlink
// (ra's files are never links; the scan does not read through one): a
// finding, not a read failure.
var errNotRegular = errors.New("not a regular file")

// checkRegular is nil when st is a regular file; errNotRegular for a
// symlink; for a dir, FIFO, socket or device a *storefile.NotRegularError:
// what ra kept under that name cannot be read, so it is unknown (a failed
// read: the result is incomplete), not absent.
func checkRegular(p string, st os.FileInfo) error {
	switch m := st.Mode(); {
	case m.IsRegular():
		return nil
	case m&os.ModeSymlink != 0:
		return errNotRegular
	default:
		return &storefile.NotRegularError{Path: p, Mode: m.Type(), Want: "regular file"}
	}
}

// openRegular opens p for reading when it is a regular file (never a
// FIFO, device or symlink: checkRegular), without blocking.
func openRegular(p string) (*os.File, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(p, st); err != nil {
		return nil, err
	}
	return storefile.OpenNoFollow(p)
}

func crc32(b []byte) uint32 { return crc32x.ChecksumIEEE(b) }

// propertiesJSON renders 0-9-1 basic properties for a record: the set
// properties by name, and the headers as name -> value (binary values
// that are not UTF-8 as {"base64": ...}, tables as objects, arrays as
// lists).
func propertiesJSON(p *rfmt.BasicProperties) (props, headers map[string]any) {
	props, headers = map[string]any{}, map[string]any{}
	set := func(k string, v *string) {
		if v != nil {
			props[k] = *v
		}
	}
	set("content_type", p.ContentType)
	set("content_encoding", p.ContentEncoding)
	set("correlation_id", p.CorrelationID)
	set("reply_to", p.ReplyTo)
	set("expiration", p.Expiration)
	set("message_id", p.MessageID)
	set("type", p.Type)
	set("user_id", p.UserID)
	set("app_id", p.AppID)
	set("cluster_id", p.ClusterID)
	if p.DeliveryMode != nil {
		props["delivery_mode"] = *p.DeliveryMode
	}
	if p.Priority != nil {
		props["priority"] = *p.Priority
	}
	if p.Timestamp != nil {
		props["timestamp"] = *p.Timestamp
	}
	for _, f := range p.Headers {
		headers[f.Name] = fieldJSON(f.Value)
	}
	return props, headers
}

func fieldJSON(v rfmt.FieldValue) any {
	switch x := v.V.(type) {
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return map[string]any{"base64": base64.StdEncoding.EncodeToString(x)}
	case rfmt.Table:
		m := map[string]any{}
		for _, f := range x {
			m[f.Name] = fieldJSON(f.Value)
		}
		return m
	case []rfmt.FieldValue:
		a := make([]any, 0, len(x))
		for _, e := range x {
			a = append(a, fieldJSON(e))
		}
		return a
	case rfmt.Decimal:
		return map[string]any{"scale": x.Scale, "unscaled": x.Unscaled}
	}
	return v.V
}
