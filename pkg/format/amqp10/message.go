package amqp10

import (
	"fmt"

	"github.com/storectl/storectl/pkg/format"
)

// Section descriptor codes of the message format (AMQP 1.0 part 3,
// §3.2.1-§3.2.10): the numeric descriptor is 0x00000000:0x000000NN.
const (
	SectionHeader                uint64 = 0x70
	SectionDeliveryAnnotations   uint64 = 0x71
	SectionMessageAnnotations    uint64 = 0x72
	SectionProperties            uint64 = 0x73
	SectionApplicationProperties uint64 = 0x74
	SectionData                  uint64 = 0x75
	SectionAmqpSequence          uint64 = 0x76
	SectionAmqpValue             uint64 = 0x77
	SectionFooter                uint64 = 0x78
)

// sectionSymbols are the symbolic descriptors of the same sections.
var sectionSymbols = map[string]uint64{
	"amqp:header:list":                SectionHeader,
	"amqp:delivery-annotations:map":   SectionDeliveryAnnotations,
	"amqp:message-annotations:map":    SectionMessageAnnotations,
	"amqp:properties:list":            SectionProperties,
	"amqp:application-properties:map": SectionApplicationProperties,
	"amqp:data:binary":                SectionData,
	"amqp:amqp-sequence:list":         SectionAmqpSequence,
	"amqp:amqp-value:*":               SectionAmqpValue,
	"amqp:footer:map":                 SectionFooter,
}

// SectionName is the spec's name of a section code.
func SectionName(code uint64) string {
	switch code {
	case SectionHeader:
		return "header"
	case SectionDeliveryAnnotations:
		return "delivery-annotations"
	case SectionMessageAnnotations:
		return "message-annotations"
	case SectionProperties:
		return "properties"
	case SectionApplicationProperties:
		return "application-properties"
	case SectionData:
		return "data"
	case SectionAmqpSequence:
		return "amqp-sequence"
	case SectionAmqpValue:
		return "amqp-value"
	case SectionFooter:
		return "footer"
	}
	return fmt.Sprintf("section(0x%x)", code)
}

// sectionType is the type each section's value must have (amqp-value:
// any, marked Described as "no check").
var sectionType = map[uint64]Type{
	SectionHeader: List, SectionDeliveryAnnotations: Map, SectionMessageAnnotations: Map,
	SectionProperties: List, SectionApplicationProperties: Map, SectionData: Binary,
	SectionAmqpSequence: List, SectionAmqpValue: Described, SectionFooter: Map,
}

// Section is one section of a message.
type Section struct {
	Code       uint64 // SectionHeader, ...
	Offset     int64  // absolute offset of its 0x00 constructor
	Size       int    // bytes, constructor and descriptor included
	Descriptor Value  // as encoded (a ulong or a symbol)
	Value      Value  // the described value
}

// Message is an AMQP 1.0 message: its sections in encoded order.
type Message struct {
	Sections []Section
}

// sectionAt decodes the described section at the start of b.
func sectionAt(b []byte, off int64) (Section, error) {
	if len(b) == 0 {
		return Section{}, format.Corrupt(off, "section", format.ErrShort)
	}
	if b[0] != codeDescribed {
		return Section{}, format.Corrupt(off, "section", format.ErrMagic)
	}
	d := decoder{b: b, base: off, budget: len(b) + zeroWidthSlack, build: true}
	desc, p := d.value(1, 1)
	if d.err != nil {
		return Section{}, d.err
	}
	var code uint64
	switch desc.Type {
	case Ulong:
		code = desc.Num
	case Symbol:
		code = sectionSymbols[string(desc.Bytes)]
	}
	want, ok := sectionType[code]
	if !ok {
		return Section{}, format.Corrupt(off+1, "section descriptor", format.ErrInvalid)
	}
	vpos := p
	v, p := d.value(p, 1)
	if d.err != nil {
		return Section{}, d.err
	}
	if want != Described && v.Type != want {
		return Section{}, format.Corrupt(off+int64(vpos), SectionName(code), format.ErrInvalid)
	}
	return Section{Code: code, Offset: off, Size: p, Descriptor: desc, Value: v}, nil
}

// DecodeMessage decodes the sections that make up b; off is the absolute
// offset of b[0]. Every byte must belong to a section with a descriptor
// of the message format. Binary, string and symbol values alias b.
func DecodeMessage(b []byte, off int64) (Message, error) {
	var m Message
	for p := 0; p < len(b); {
		s, err := sectionAt(b[p:], off+int64(p))
		if err != nil {
			return Message{}, err
		}
		m.Sections = append(m.Sections, s)
		p += s.Size
	}
	return m, nil
}

// SectionInfo is where one section lies, from WalkSections.
type SectionInfo struct {
	Code   uint64
	Offset int64 // absolute offset of the section
	Size   int
	// Data is the bytes of a data section's binary (nil for others).
	Data []byte
}

// WalkSections checks that b is a sequence of message sections and calls
// fn for each, without building their values (no allocation): the cheap
// check of every message of a scan. A section's list or map is checked by
// its size and count, not item by item (DecodeMessage checks those).
func WalkSections(b []byte, off int64, fn func(SectionInfo) error) error {
	for p := 0; p < len(b); {
		// The sections as RabbitMQ writes them (a smallulong descriptor,
		// fastSection's encodings), here without a decoder; from the
		// first other one on, walkSections (which makes every error).
		// Nothing here changes what the decoder would start from: its
		// budget is spent only by the values it decodes.
		if p+2 >= len(b) || b[p] != codeDescribed || b[p+1] != codeSmallUlong {
			return walkSections(b, off, p, fn)
		}
		code, q := uint64(b[p+2]), p+3
		want, ok := sectionTypeOf(code)
		if !ok {
			return walkSections(b, off, p, fn)
		}
		data, r, ok := fastSection(b, q)
		if !ok || want != Described && codeTypes[b[q]] != want {
			return walkSections(b, off, p, fn)
		}
		if err := emitSection(fn, code, off+int64(p), r-p, data); err != nil {
			return err
		}
		p = r
	}
	return nil
}

// walkSections is WalkSections from the section at start on, with the
// decoder.
func walkSections(b []byte, off int64, start int, fn func(SectionInfo) error) error {
	d := decoder{b: b, base: off, budget: len(b) + zeroWidthSlack, shallow: true}
	for p := start; p < len(b); {
		if b[p] != codeDescribed {
			return format.Corrupt(off+int64(p), "section", format.ErrMagic)
		}
		// The descriptor: smallulong 0x53 NN as RabbitMQ writes it, or any
		// other ulong or symbol.
		var code uint64
		q := p + 1
		if q+1 < len(b) && b[q] == codeSmallUlong {
			code, q = uint64(b[q+1]), q+2
		} else {
			d.build = true
			desc, r := d.value(q, 1)
			d.build = false
			if d.err != nil {
				return d.err
			}
			switch desc.Type {
			case Ulong:
				code = desc.Num
			case Symbol:
				code = sectionSymbols[string(desc.Bytes)]
			}
			q = r
		}
		want, ok := sectionTypeOf(code)
		if !ok {
			return format.Corrupt(off+int64(p)+1, "section descriptor", format.ErrInvalid)
		}
		data, r, ok := decoderSection(&d, q)
		if !ok { // anything but the usual encodings, and every error
			v, rr := d.value(q, 1)
			if d.err != nil {
				return d.err
			}
			data, r = v.Bytes, rr
			if want != Described && v.Type != want {
				return format.Corrupt(off+int64(q), SectionName(code), format.ErrInvalid)
			}
		} else if want != Described && codeTypes[b[q]] != want {
			return format.Corrupt(off+int64(q), SectionName(code), format.ErrInvalid)
		}
		if err := emitSection(fn, code, off+int64(p), r-p, data); err != nil {
			return err
		}
		p = r
	}
	return nil
}

// emitSection hands one walked section to fn (nil: no callback); only a
// data section carries its bytes.
func emitSection(fn func(SectionInfo) error, code uint64, off int64, size int, data []byte) error {
	if fn == nil {
		return nil
	}
	si := SectionInfo{Code: code, Offset: off, Size: size}
	if code == SectionData {
		si.Data = data
	}
	return fn(si)
}

// fastSection skips the section value at q when it has one of the
// encodings RabbitMQ writes (vbin, list, map with well-formed sizes),
// returning a binary's bytes and the end; ok false sends the caller to
// the full decoder (other encodings, and every error, whose report it
// makes).
func fastSection(b []byte, q int) (data []byte, end int, ok bool) {
	c, w, start, end, ok := sectionSpan(b, q)
	switch {
	case !ok:
		return nil, 0, false
	case c == codeList0:
		return nil, end, true
	case c == codeVbin8 || c == codeVbin32:
		return b[start:end:end], end, true
	case !compoundOK(b, c == codeMap8 || c == codeMap32, w, start, end):
		return nil, 0, false
	}
	return nil, end, true
}

// sectionSpan reads the constructor at q of a section value in one of
// the encodings fastSection takes (list0, vbin, list, map) and the bytes
// its size says it holds: the code, the width of its size (0 for list0),
// where its bytes start and end. ok is false for any other code or a
// size past b.
func sectionSpan(b []byte, q int) (c byte, w, start, end int, ok bool) {
	if q >= len(b) {
		return 0, 0, 0, 0, false
	}
	c = b[q]
	switch c {
	case codeList0:
		return c, 0, q + 1, q + 1, true
	case codeVbin8, codeList8, codeMap8:
		w = 1
	case codeVbin32, codeList32, codeMap32:
		w = 4
	default:
		return 0, 0, 0, 0, false
	}
	if q+1+w > len(b) {
		return 0, 0, 0, 0, false
	}
	n := int(b[q+1])
	if w == 4 {
		n = int(be.Uint32(b[q+1:]))
	}
	start = q + 1 + w
	if n < 0 || n > len(b)-start {
		return 0, 0, 0, 0, false
	}
	return c, w, start, start + n, true
}

// compoundOK makes shallowCompound's checks of the list or map whose
// count (w bytes) starts at p and whose bytes end at end, without a Value
// (this is the stream scan's inner loop): the count fits, a map's count
// is even, an empty one has nothing after its count.
func compoundOK(b []byte, isMap bool, w, p, end int) bool {
	if end-p < w {
		return false
	}
	n := int(b[p])
	if w == 4 {
		n = int(be.Uint32(b[p:]))
	}
	return n <= end-p-w && (!isMap || n%2 == 0) && (n != 0 || end == p+w)
}

// decoderSection is fastSection through the decoder's own check of a
// list or map (shallowCompound), as the walk made it before fastSection
// had compoundOK: walkSections' path, and what TestWalkSectionsFastSame
// holds fastSection to.
func decoderSection(d *decoder, q int) (data []byte, end int, ok bool) {
	c, _, start, end, ok := sectionSpan(d.b, q)
	switch {
	case !ok:
		return nil, 0, false
	case c == codeList0:
		return nil, end, true
	case c == codeVbin8 || c == codeVbin32:
		return d.b[start:end:end], end, true
	}
	if _, e := d.shallowCompound(Value{Type: codeTypes[c], Code: c}, start, end); e != end || d.err != nil {
		d.err = nil
		return nil, 0, false
	}
	return nil, end, true
}

// sectionTypeOf is sectionType without a map lookup.
func sectionTypeOf(code uint64) (Type, bool) {
	switch code {
	case SectionHeader, SectionProperties, SectionAmqpSequence:
		return List, true
	case SectionDeliveryAnnotations, SectionMessageAnnotations, SectionApplicationProperties, SectionFooter:
		return Map, true
	case SectionData:
		return Binary, true
	case SectionAmqpValue:
		return Described, true
	}
	return 0, false
}

// Section returns the first section with code, or nil.
func (m *Message) Section(code uint64) *Section {
	for i := range m.Sections {
		if m.Sections[i].Code == code {
			return &m.Sections[i]
		}
	}
	return nil
}

// MessageAnnotations is the message-annotations map (a null Value when
// the section is absent).
func (m *Message) MessageAnnotations() Value { return m.sectionValue(SectionMessageAnnotations) }

// DeliveryAnnotations is the delivery-annotations map (null when absent).
func (m *Message) DeliveryAnnotations() Value { return m.sectionValue(SectionDeliveryAnnotations) }

// ApplicationProperties is the application-properties map (null when absent).
func (m *Message) ApplicationProperties() Value {
	return m.sectionValue(SectionApplicationProperties)
}

// Footer is the footer map (null when absent).
func (m *Message) Footer() Value { return m.sectionValue(SectionFooter) }

func (m *Message) sectionValue(code uint64) Value {
	if s := m.Section(code); s != nil {
		return s.Value
	}
	return Value{}
}

// Data returns the bytes of every data section, in order.
func (m *Message) Data() [][]byte {
	var out [][]byte
	for _, s := range m.Sections {
		if s.Code == SectionData {
			out = append(out, s.Value.Bytes)
		}
	}
	return out
}

// BodyKind says how the body is encoded: "data", "amqp-sequence",
// "amqp-value" or "" (no body section).
func (m *Message) BodyKind() string {
	for _, s := range m.Sections {
		switch s.Code {
		case SectionData, SectionAmqpSequence, SectionAmqpValue:
			return SectionName(s.Code)
		}
	}
	return ""
}

// Header is the header section's fields (AMQP 1.0 §3.2.1); absent fields
// are null Values.
type Header struct {
	Durable, Priority, TTL, FirstAcquirer, DeliveryCount Value
}

// Header returns the header section's fields (all null when absent).
func (m *Message) Header() Header {
	var f [5]Value
	if s := m.Section(SectionHeader); s != nil {
		copy(f[:], s.Value.Items)
	}
	return Header{f[0], f[1], f[2], f[3], f[4]}
}

// Properties is the properties section's fields (AMQP 1.0 §3.2.4);
// absent fields are null Values.
type Properties struct {
	MessageID, UserID, To, Subject, ReplyTo, CorrelationID, ContentType, ContentEncoding,
	AbsoluteExpiryTime, CreationTime, GroupID, GroupSequence, ReplyToGroupID Value
}

// PropertyNames are the properties' field names in list order.
var PropertyNames = [13]string{"message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
	"content-type", "content-encoding", "absolute-expiry-time", "creation-time", "group-id",
	"group-sequence", "reply-to-group-id"}

// Fields returns the properties in list order.
func (p Properties) Fields() [13]Value {
	return [13]Value{p.MessageID, p.UserID, p.To, p.Subject, p.ReplyTo, p.CorrelationID, p.ContentType,
		p.ContentEncoding, p.AbsoluteExpiryTime, p.CreationTime, p.GroupID, p.GroupSequence, p.ReplyToGroupID}
}

// Properties returns the properties section's fields (all null when absent).
func (m *Message) Properties() Properties {
	var f [13]Value
	if s := m.Section(SectionProperties); s != nil {
		copy(f[:], s.Value.Items)
	}
	return Properties{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12]}
}

// NewSection builds a section with the numeric descriptor.
func NewSection(code uint64, v Value) Section {
	return Section{Code: code, Descriptor: UlongValue(code), Value: v}
}

// FieldList builds the list of a header or properties section from its
// fields, dropping trailing nulls as amqp10_framing does.
func FieldList(fields ...Value) Value {
	n := len(fields)
	for n > 0 && fields[n-1].IsNull() {
		n--
	}
	return ListValue(fields[:n]...)
}

// AppendMessage appends the encoding of m's sections to dst.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	for _, s := range m.Sections {
		var err error
		if dst, err = Append(dst, DescribedValue(s.Descriptor, s.Value)); err != nil {
			return dst, fmt.Errorf("%s section: %w", SectionName(s.Code), err)
		}
	}
	return dst, nil
}
