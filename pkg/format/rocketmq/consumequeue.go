package rocketmq

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format"
)

// CQUnitSize is CQ_STORE_UNIT_SIZE: one consume queue unit
// (docs/formats/rocketmq.md §4.1):
// long commitlog offset | int size | long tagsCode.
const CQUnitSize = 20

// CQPlaceholderSize marks a pre-blank placeholder unit (fillPreBlank):
// offset 0, size Integer.MAX_VALUE, tagsCode 0.
const CQPlaceholderSize = 0x7FFFFFFF

// DefaultCQFileSize is mappedFileSizeConsumeQueue: 300000 units.
const DefaultCQFileSize = 300000 * CQUnitSize

// CQFileSizeFor is MessageStoreConfig.getMappedFileSizeConsumeQueue: the
// configured size rounded up to a whole number of 20-byte units.
func CQFileSizeFor(configured int64) int64 {
	if configured <= 0 {
		return DefaultCQFileSize
	}
	return (configured + CQUnitSize - 1) / CQUnitSize * CQUnitSize
}

// CQUnit is one consume queue unit.
type CQUnit struct {
	CommitLogOffset int64
	Size            int32
	TagsCode        int64
}

// Valid is the broker's recovery rule: offset >= 0 && size > 0. Note that
// placeholders pass it.
func (u CQUnit) Valid() bool { return u.CommitLogOffset >= 0 && u.Size > 0 }

// IsZero reports an unwritten unit (all zeros): where recovery stops.
func (u CQUnit) IsZero() bool { return u == CQUnit{} }

// IsPlaceholder reports a fillPreBlank unit.
func (u CQUnit) IsPlaceholder() bool {
	return u.CommitLogOffset == 0 && u.Size == CQPlaceholderSize && u.TagsCode == 0
}

// IsExtAddress reports whether TagsCode is a ConsumeQueueExt address
// (tagsCode <= Integer.MIN_VALUE - 1, docs/formats/rocketmq.md §4.3) rather than a tags hash.
func (u CQUnit) IsExtAddress() bool { return u.TagsCode <= -2147483649 }

// DecodeCQUnit decodes the unit at b[0]; off is its offset for errors.
// Only short input is an error: what a unit means is the verifier's call.
func DecodeCQUnit(b []byte, off int64) (CQUnit, error) {
	if len(b) >= CQUnitSize { // the whole unit: direct loads (once per unit of a queue walk)
		return CQUnit{CommitLogOffset: int64(binary.BigEndian.Uint64(b)), Size: int32(binary.BigEndian.Uint32(b[8:])),
			TagsCode: int64(binary.BigEndian.Uint64(b[12:]))}, nil
	}
	return decodeCQUnitFields(b, off)
}

// decodeCQUnitFields is DecodeCQUnit field by field: a short b's error
// names the field it ends in (FuzzCQUnit keeps the two equal).
func decodeCQUnitFields(b []byte, off int64) (CQUnit, error) {
	c := format.Cursor{B: b}
	u := CQUnit{
		CommitLogOffset: int64(c.U64("commitLogOffset")),
		Size:            int32(c.U32("size")),
		TagsCode:        int64(c.U64("tagsCode")),
	}
	return u, c.Err(off)
}

// AppendCQUnit appends the 20-byte encoding of u.
func AppendCQUnit(dst []byte, u CQUnit) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(u.CommitLogOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.Size))
	return binary.BigEndian.AppendUint64(dst, uint64(u.TagsCode))
}
