package amqp10

import "fmt"

// Append appends the encoding of v to dst. A value with a format code
// (decoded ones) is written with that code; one without gets the
// smallest form, the choices of RabbitMQ's amqp10_binary_generator. It
// fails only for a value no code can hold (a string of 4 GiB, a code
// that does not fit the value, a malformed described value).
func Append(dst []byte, v Value) ([]byte, error) {
	if v.Type == Described {
		if len(v.Items) != 2 {
			return dst, fmt.Errorf("amqp10: described value needs a descriptor and a value")
		}
		dst = append(dst, codeDescribed)
		dst, err := Append(dst, v.Items[0])
		if err != nil {
			return dst, err
		}
		return Append(dst, v.Items[1])
	}
	code := v.Code
	if code == 0 && (v.Type == List && len(v.Items) > 0 || v.Type == Map || v.Type == Array) {
		return appendCompoundSmallest(dst, v)
	}
	if code == 0 {
		code = smallestCode(v)
	}
	if t, ok := codeType[code]; !ok || t != v.Type {
		return dst, fmt.Errorf("amqp10: format code 0x%02x does not encode a %s", code, v.Type)
	}
	dst = append(dst, code)
	return appendBody(dst, code, v)
}

// MustAppend is Append for values built by the caller that are known to
// be encodable; it panics otherwise.
func MustAppend(dst []byte, v Value) []byte {
	out, err := Append(dst, v)
	if err != nil {
		panic(err)
	}
	return out
}

func smallestCode(v Value) byte {
	switch v.Type {
	case Null:
		return codeNull
	case Boolean:
		if v.Num != 0 {
			return codeTrue
		}
		return codeFalse
	case Ubyte:
		return codeUbyte
	case Ushort:
		return codeUshort
	case Uint:
		switch {
		case v.Num == 0:
			return codeUint0
		case v.Num < 256:
			return codeSmallUint
		}
		return codeUint
	case Ulong:
		switch {
		case v.Num == 0:
			return codeUlong0
		case v.Num < 256:
			return codeSmallUlong
		}
		return codeUlong
	case Byte:
		return codeByte
	case Short:
		return codeShort
	case Int:
		if n := v.Int(); n >= -128 && n <= 127 {
			return codeSmallInt
		}
		return codeInt
	case Long:
		if n := v.Int(); n >= -128 && n <= 127 {
			return codeSmallLong
		}
		return codeLong
	case Float:
		return codeFloat
	case Double:
		return codeDouble
	case Decimal32:
		return codeDecimal32
	case Decimal64:
		return codeDecimal64
	case Decimal128:
		return codeDecimal128
	case Char:
		return codeChar
	case Timestamp:
		return codeTimestamp
	case UUID:
		return codeUUID
	case Binary:
		if len(v.Bytes) <= 0xff {
			return codeVbin8
		}
		return codeVbin32
	case String:
		if len(v.Bytes) <= 0xff {
			return codeStr8
		}
		return codeStr32
	case Symbol:
		if len(v.Bytes) <= 0xff {
			return codeSym8
		}
		return codeSym32
	case List:
		return codeList0
	}
	return 0
}

// smallestArrayCode is the element constructor amqp10_binary_generator
// uses for an array of type elem (the 4-byte forms of variable and
// compound types).
func smallestArrayCode(elem Type, items []Value) byte {
	switch elem {
	case Null:
		return codeNull
	case Boolean:
		return codeBoolean
	case Ubyte:
		return codeUbyte
	case Ushort:
		return codeUshort
	case Uint:
		return codeUint
	case Ulong:
		return codeUlong
	case Byte:
		return codeByte
	case Short:
		return codeShort
	case Int:
		return codeInt
	case Long:
		return codeLong
	case Float:
		return codeFloat
	case Double:
		return codeDouble
	case Decimal32:
		return codeDecimal32
	case Decimal64:
		return codeDecimal64
	case Decimal128:
		return codeDecimal128
	case Char:
		return codeChar
	case Timestamp:
		return codeTimestamp
	case UUID:
		return codeUUID
	case Binary:
		return codeVbin32
	case String:
		return codeStr32
	case Symbol:
		return codeSym32
	case List:
		return codeList32
	case Map:
		return codeMap32
	case Array:
		return codeArray32
	}
	return 0
}

// appendCompoundSmallest encodes a list, map or array without a format
// code: the one-byte size form when fewer than 255 items take fewer than
// 255 bytes, as amqp10_binary_generator decides.
func appendCompoundSmallest(dst []byte, v Value) ([]byte, error) {
	var body []byte
	var err error
	if v.Type == Array {
		body, err = appendArrayElems(nil, v)
	} else {
		if v.Type == Map && len(v.Items)%2 != 0 {
			return dst, fmt.Errorf("amqp10: a map needs an even number of items, has %d", len(v.Items))
		}
		for _, it := range v.Items {
			if body, err = Append(body, it); err != nil {
				break
			}
		}
	}
	if err != nil {
		return dst, err
	}
	short := len(v.Items) < 0xff && len(body)+1 < 0x100
	codes := map[Type][2]byte{List: {codeList8, codeList32}, Map: {codeMap8, codeMap32}, Array: {codeArray8, codeArray32}}[v.Type]
	if short {
		dst = append(dst, codes[0])
	} else {
		dst = append(dst, codes[1])
	}
	return appendSized(dst, short, len(v.Items), body)
}

func appendBody(dst []byte, code byte, v Value) ([]byte, error) {
	switch code >> 4 {
	case 0x4:
		switch code {
		case codeTrue, codeFalse:
			if (code == codeTrue) != (v.Num != 0) {
				return dst, fmt.Errorf("amqp10: boolean %v cannot be encoded as 0x%02x", v.Num != 0, code)
			}
		case codeUint0, codeUlong0:
			if v.Num != 0 {
				return dst, fmt.Errorf("amqp10: %d cannot be encoded as 0x%02x", v.Num, code)
			}
		case codeList0:
			if len(v.Items) != 0 {
				return dst, fmt.Errorf("amqp10: a list of %d items cannot be encoded as list0", len(v.Items))
			}
		}
		return dst, nil
	case 0x5:
		switch code {
		case codeSmallUint, codeSmallUlong, codeUbyte, codeBoolean:
			if v.Num > 0xff {
				return dst, fmt.Errorf("amqp10: %d does not fit 0x%02x", v.Num, code)
			}
		case codeSmallInt, codeSmallLong, codeByte:
			if n := v.Int(); n < -128 || n > 127 {
				return dst, fmt.Errorf("amqp10: %d does not fit 0x%02x", n, code)
			}
		}
		return append(dst, byte(v.Num)), nil
	case 0x6:
		return be.AppendUint16(dst, uint16(v.Num)), nil
	case 0x7:
		return be.AppendUint32(dst, uint32(v.Num)), nil
	case 0x8:
		return be.AppendUint64(dst, v.Num), nil
	case 0x9:
		if len(v.Bytes) != 16 {
			return dst, fmt.Errorf("amqp10: %s needs 16 bytes, has %d", v.Type, len(v.Bytes))
		}
		return append(dst, v.Bytes...), nil
	case 0xa:
		if len(v.Bytes) > 0xff {
			return dst, fmt.Errorf("amqp10: %d bytes do not fit 0x%02x", len(v.Bytes), code)
		}
		return append(append(dst, byte(len(v.Bytes))), v.Bytes...), nil
	case 0xb:
		if int64(len(v.Bytes)) > 0xffffffff {
			return dst, fmt.Errorf("amqp10: %d bytes do not fit 0x%02x", len(v.Bytes), code)
		}
		return append(be.AppendUint32(dst, uint32(len(v.Bytes))), v.Bytes...), nil
	case 0xc, 0xd:
		if v.Type == Map && len(v.Items)%2 != 0 {
			return dst, fmt.Errorf("amqp10: a map needs an even number of items, has %d", len(v.Items))
		}
		var body []byte
		for _, it := range v.Items {
			var err error
			if body, err = Append(body, it); err != nil {
				return dst, err
			}
		}
		return appendSized(dst, code>>4 == 0xc, len(v.Items), body)
	case 0xe, 0xf:
		body, err := appendArrayElems(nil, v)
		if err != nil {
			return dst, err
		}
		return appendSized(dst, code>>4 == 0xe, len(v.Items), body)
	}
	return dst, fmt.Errorf("amqp10: unknown format code 0x%02x", code)
}

// appendSized writes size, count and body of a compound or array.
func appendSized(dst []byte, short bool, count int, body []byte) ([]byte, error) {
	if short {
		if count > 0xff || len(body)+1 > 0xff {
			return dst, fmt.Errorf("amqp10: %d items in %d bytes do not fit a one-byte size", count, len(body))
		}
		dst = append(dst, byte(len(body)+1), byte(count))
		return append(dst, body...), nil
	}
	if int64(len(body))+4 > 0xffffffff {
		return dst, fmt.Errorf("amqp10: %d bytes do not fit a four-byte size", len(body))
	}
	dst = be.AppendUint32(dst, uint32(len(body)+4))
	dst = be.AppendUint32(dst, uint32(count))
	return append(dst, body...), nil
}

// appendArrayElems writes an array's element constructor and elements.
func appendArrayElems(dst []byte, v Value) ([]byte, error) {
	ec := v.ElemCode
	if v.ElemDesc != nil {
		dst = append(dst, codeDescribed)
		var err error
		if dst, err = Append(dst, *v.ElemDesc); err != nil {
			return dst, err
		}
	}
	if ec == 0 {
		if len(v.Items) == 0 {
			ec = codeNull
		} else {
			it := v.Items[0]
			if v.ElemDesc != nil {
				it = it.Inner()
			}
			ec = smallestArrayCode(it.Type, nil)
		}
	}
	et, ok := codeType[ec]
	if !ok {
		return dst, fmt.Errorf("amqp10: unknown array element code 0x%02x", ec)
	}
	dst = append(dst, ec)
	for _, it := range v.Items {
		if v.ElemDesc != nil {
			it = it.Inner()
		}
		if it.Type != et {
			return dst, fmt.Errorf("amqp10: a %s in an array of %s", it.Type, et)
		}
		var err error
		if dst, err = appendBody(dst, ec, it); err != nil {
			return dst, err
		}
	}
	return dst, nil
}
