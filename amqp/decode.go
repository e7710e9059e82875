package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// ErrMalformed is wrapped by every decoding error: a length beyond the input, an unknown
// constructor, a value of the wrong type in a field, nesting deeper than allowed, trailing
// bytes inside a compound value. The server answers it with amqp:decode-error.
var ErrMalformed = errors.New("amqp: malformed encoding")

// maxDecodeDepth bounds the nesting of compound and described values. Performatives nest
// about five deep and real messages rarely more than a few levels.
const maxDecodeDepth = 64

// decoder reads AMQP values from b, never beyond it. Every length is checked against what
// remains, every element count against the bytes that could hold it, so no input makes it
// allocate much more than the input's size, and none makes it panic.
type decoder struct {
	b     []byte
	off   int
	depth int
	// zeroWidth bounds the elements of arrays whose constructor has no width (null, true,
	// false, uint0, ulong0, list0): they are the only values that take no input bytes.
	zeroWidth int
	// budget is what the decoded values may still take in memory, in bytes: each list, map or
	// array element is a Go interface value (16 bytes; a map entry 32) that may carry as little
	// as one encoded byte (a null), so without a bound a frame of nulls would cost 16 to 32 times
	// its size. See decodeBudget.
	budget int
	// checkOnly makes the decoder check values without building them: compound values come
	// back empty and binaries, strings and symbols as their zero values, so what it reads
	// costs no memory that outlives one value and needs no budget (a body that is only to be
	// kept as encoded, UnmarshalKeepingBody).
	checkOnly bool
	// u32s and bools back the optional (pointer) fields of one performative, so decoding
	// one does not allocate them; they live as long as the decoder.
	u32s  [6]uint32
	n32   int
	bools [1]bool
	nb    int
}

// newUint32 returns storage for an optional uint field.
func (d *decoder) newUint32(v uint32) *uint32 {
	if d.n32 < len(d.u32s) {
		p := &d.u32s[d.n32]
		d.n32++
		*p = v
		return p
	}
	p := new(uint32) // not &v: that would move v to the heap on every call
	*p = v
	return p
}

// newBool returns storage for an optional boolean field.
func (d *decoder) newBool(v bool) *bool {
	if d.nb < len(d.bools) {
		p := &d.bools[d.nb]
		d.nb++
		*p = v
		return p
	}
	p := new(bool)
	*p = v
	return p
}

// decodeBudget is the memory the values decoded from n bytes may take: 8 times the input, and
// at least 64 KiB, so small frames are never refused while a large one of nulls is.
// Performatives and real messages stay well under it (a performative's nulls are a few dozen).
func decodeBudget(n int) int { return max(8*n, 64<<10) }

func newDecoder(b []byte) decoder {
	return decoder{b: b, zeroWidth: len(b) + 256, budget: decodeBudget(len(b))}
}

// charge takes n bytes of the decoding budget for values about to be allocated.
func (d *decoder) charge(n int) error {
	if d.checkOnly {
		return nil // nothing is kept
	}
	if n < 0 || n > d.budget {
		return d.errorf("the values would take more memory than %d bytes of input may (%d bytes)", len(d.b), n)
	}
	d.budget -= n
	return nil
}

// Go sizes of what the decoder allocates per element, for charge.
const (
	sizeInterface = 16
	sizeMapEntry  = 32
)

// DecodeValue decodes one AMQP value from the start of b and returns it with the number of
// bytes it took. Errors wrap ErrMalformed.
func DecodeValue(b []byte) (v any, n int, err error) {
	d := newDecoder(b)
	v, err = d.value()
	return v, d.off, err
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s (offset %d)", ErrMalformed, fmt.Sprintf(format, args...), d.off)
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) need(n int) error {
	if n < 0 || d.remaining() < n {
		return d.errorf("need %d bytes, %d remain", n, d.remaining())
	}
	return nil
}

func (d *decoder) u8() (uint8, error) {
	if err := d.need(1); err != nil {
		return 0, err
	}
	v := d.b[d.off]
	d.off++
	return v, nil
}

func (d *decoder) u16() (uint16, error) {
	if err := d.need(2); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v, nil
}

func (d *decoder) u32() (uint32, error) {
	if err := d.need(4); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v, nil
}

func (d *decoder) u64() (uint64, error) {
	if err := d.need(8); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v, nil
}

func (d *decoder) bytes(n int) ([]byte, error) {
	if err := d.need(n); err != nil {
		return nil, err
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v, nil
}

// peek returns the next byte without consuming it.
func (d *decoder) peek() (byte, error) {
	if err := d.need(1); err != nil {
		return 0, err
	}
	return d.b[d.off], nil
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > maxDecodeDepth {
		return d.errorf("values nested deeper than %d", maxDecodeDepth)
	}
	return nil
}

func (d *decoder) leave() { d.depth-- }

// value decodes one value, constructor included.
func (d *decoder) value() (any, error) {
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	if code == codeDescribed {
		return d.described()
	}
	return d.valueOf(code)
}

func (d *decoder) described() (Described, error) {
	if err := d.enter(); err != nil {
		return Described{}, err
	}
	if err := d.charge(sizeMapEntry); err != nil {
		return Described{}, err
	}
	defer d.leave()
	desc, err := d.value()
	if err != nil {
		return Described{}, err
	}
	v, err := d.value()
	if err != nil {
		return Described{}, err
	}
	return Described{Descriptor: desc, Value: v}, nil
}

// valueOf decodes the body of a value whose constructor code has been read: in a value, or
// each element of an array.
func (d *decoder) valueOf(code byte) (any, error) {
	switch code {
	case codeNull:
		return nil, nil
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeBool:
		return d.boolByte()
	case codeUbyte:
		return d.u8()
	case codeUshort:
		return d.u16()
	case codeUint0:
		return uint32(0), nil
	case codeSmallUint:
		v, err := d.u8()
		return uint32(v), err
	case codeUint:
		return d.u32()
	case codeUlong0:
		return uint64(0), nil
	case codeSmallUlong:
		v, err := d.u8()
		return uint64(v), err
	case codeUlong:
		return d.u64()
	case codeByte:
		v, err := d.u8()
		return int8(v), err
	case codeShort:
		v, err := d.u16()
		return int16(v), err
	case codeSmallInt:
		v, err := d.u8()
		return int32(int8(v)), err
	case codeInt:
		v, err := d.u32()
		return int32(v), err
	case codeSmallLong:
		v, err := d.u8()
		return int64(int8(v)), err
	case codeLong:
		v, err := d.u64()
		return int64(v), err
	case codeFloat:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case codeDouble:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case codeDecimal32:
		var v Decimal32
		b, err := d.bytes(len(v))
		copy(v[:], b)
		return v, err
	case codeDecimal64:
		var v Decimal64
		b, err := d.bytes(len(v))
		copy(v[:], b)
		return v, err
	case codeDecimal128:
		var v Decimal128
		b, err := d.bytes(len(v))
		copy(v[:], b)
		return v, err
	case codeChar:
		v, err := d.u32()
		if err != nil {
			return nil, err
		}
		if c := Char(int32(v)); validChar(c) {
			return c, nil
		}
		return nil, d.errorf("char %#x is not a Unicode scalar value", v)
	case codeTimestamp:
		v, err := d.u64()
		return time.UnixMilli(int64(v)).UTC(), err
	case codeUUID:
		var v UUID
		b, err := d.bytes(len(v))
		copy(v[:], b)
		return v, err
	case codeVbin8, codeVbin32:
		b, err := d.variable(code == codeVbin32)
		if err != nil || d.checkOnly {
			return nil, err
		}
		return append(make([]byte, 0, len(b)), b...), nil
	case codeStr8, codeStr32:
		return d.stringBody(code == codeStr32)
	case codeSym8, codeSym32:
		return d.symbolBody(code == codeSym32)
	case codeList0, codeList8, codeList32:
		return d.list(code)
	case codeMap8, codeMap32:
		return d.mapBody(code)
	case codeArray8, codeArray32:
		return d.array(code)
	}
	return nil, d.errorf("unknown constructor %#02x", code)
}

func (d *decoder) boolByte() (bool, error) {
	v, err := d.u8()
	if err != nil {
		return false, err
	}
	switch v {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, d.errorf("boolean byte %#02x", v)
}

// stringBody reads a string, which must be UTF-8 (the specification's encoding): text that is
// not would be echoed back in refusals that strict clients then fail to decode.
func (d *decoder) stringBody(wide bool) (string, error) {
	b, err := d.variable(wide)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", d.errorf("a string is not valid UTF-8")
	}
	if d.checkOnly {
		return "", nil
	}
	return string(b), nil
}

// symbolBody reads a symbol, which must be ASCII (the specification's encoding).
func (d *decoder) symbolBody(wide bool) (Symbol, error) {
	b, err := d.variable(wide)
	if err != nil {
		return "", err
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return "", d.errorf("a symbol is not ASCII")
		}
	}
	if d.checkOnly {
		return "", nil
	}
	return Symbol(b), nil
}

// variable reads the length-prefixed bytes of a binary, string or symbol body.
func (d *decoder) variable(wide bool) ([]byte, error) {
	var n int
	if wide {
		v, err := d.u32()
		if err != nil {
			return nil, err
		}
		if uint64(v) > uint64(d.remaining()) {
			return nil, d.errorf("length %d exceeds the %d bytes remaining", v, d.remaining())
		}
		n = int(v)
	} else {
		v, err := d.u8()
		if err != nil {
			return nil, err
		}
		n = int(v)
	}
	return d.bytes(n)
}

// compoundHeader reads the size and count of a list, map or array body and returns the count
// and the offset where the body ends. The body must fit in what remains.
func (d *decoder) compoundHeader(wide bool) (count, end int, err error) {
	if wide {
		size, err := d.u32()
		if err != nil {
			return 0, 0, err
		}
		if size < 4 || uint64(size) > uint64(d.remaining()) {
			return 0, 0, d.errorf("compound size %d with %d bytes remaining", size, d.remaining())
		}
		end = d.off + int(size)
		c, _ := d.u32()
		if uint64(c) > uint64(end-d.off)+uint64(d.zeroWidth) {
			return 0, 0, d.errorf("count %d cannot fit in %d bytes", c, end-d.off)
		}
		return int(c), end, nil
	}
	size, err := d.u8()
	if err != nil {
		return 0, 0, err
	}
	if size < 1 || int(size) > d.remaining() {
		return 0, 0, d.errorf("compound size %d with %d bytes remaining", size, d.remaining())
	}
	end = d.off + int(size)
	c, _ := d.u8()
	return int(c), end, nil
}

// within runs f with the decoder limited to b[:end], and checks f consumed exactly that.
func (d *decoder) within(end int, what string, f func() error) error {
	saved := d.b
	d.b = d.b[:end]
	err := f()
	d.b = saved
	if err != nil {
		return err
	}
	if d.off != end {
		return d.errorf("%d unused bytes at the end of %s", end-d.off, what)
	}
	return nil
}

func (d *decoder) list(code byte) (List, error) {
	if code == codeList0 {
		return List{}, nil
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	count, end, err := d.compoundHeader(code == codeList32)
	if err != nil {
		return nil, err
	}
	if count > end-d.off {
		return nil, d.errorf("list of %d elements in %d bytes", count, end-d.off)
	}
	if err := d.charge(count * sizeInterface); err != nil {
		return nil, err
	}
	var l List
	if !d.checkOnly {
		l = make(List, count)
	}
	err = d.within(end, "list", func() error {
		for i := range count {
			v, err := d.value()
			if err != nil {
				return err
			}
			if l != nil {
				l[i] = v
			}
		}
		return nil
	})
	return l, err
}

func (d *decoder) mapBody(code byte) (Map, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	count, end, err := d.compoundHeader(code == codeMap32)
	if err != nil {
		return nil, err
	}
	if count%2 != 0 {
		return nil, d.errorf("map with an odd count %d", count)
	}
	if count > end-d.off {
		return nil, d.errorf("map of %d elements in %d bytes", count, end-d.off)
	}
	if err := d.charge(count / 2 * sizeMapEntry); err != nil {
		return nil, err
	}
	var m Map
	if !d.checkOnly {
		m = make(Map, count/2)
	}
	err = d.within(end, "map", func() error {
		for i := range count / 2 {
			k, err := d.value()
			if err != nil {
				return err
			}
			v, err := d.value()
			if err != nil {
				return err
			}
			if m != nil {
				m[i] = MapEntry{Key: k, Value: v}
			}
		}
		return nil
	})
	return m, err
}

// elementWidth is the encoded width of an array element for fixed-width constructors, 0 for
// zero-width ones and -1 for variable-width ones (at least one byte each).
func elementWidth(code byte) int {
	switch code {
	case codeNull, codeTrue, codeFalse, codeUint0, codeUlong0, codeList0:
		return 0
	case codeBool, codeUbyte, codeByte, codeSmallUint, codeSmallUlong, codeSmallInt, codeSmallLong:
		return 1
	case codeUshort, codeShort:
		return 2
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		return 4
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		return 8
	case codeUUID, codeDecimal128:
		return 16
	}
	return -1
}

// elementType maps an element constructor to the Type an Array reports.
func elementType(code byte) (Type, bool) {
	switch code {
	case codeNull:
		return TypeNull, true
	case codeTrue, codeFalse, codeBool:
		return TypeBoolean, true
	case codeUbyte:
		return TypeUbyte, true
	case codeUshort:
		return TypeUshort, true
	case codeUint0, codeSmallUint, codeUint:
		return TypeUint, true
	case codeUlong0, codeSmallUlong, codeUlong:
		return TypeUlong, true
	case codeByte:
		return TypeByte, true
	case codeShort:
		return TypeShort, true
	case codeSmallInt, codeInt:
		return TypeInt, true
	case codeSmallLong, codeLong:
		return TypeLong, true
	case codeFloat:
		return TypeFloat, true
	case codeDouble:
		return TypeDouble, true
	case codeDecimal32:
		return TypeDecimal32, true
	case codeDecimal64:
		return TypeDecimal64, true
	case codeDecimal128:
		return TypeDecimal128, true
	case codeChar:
		return TypeChar, true
	case codeTimestamp:
		return TypeTimestamp, true
	case codeUUID:
		return TypeUUID, true
	case codeVbin8, codeVbin32:
		return TypeBinary, true
	case codeStr8, codeStr32:
		return TypeString, true
	case codeSym8, codeSym32:
		return TypeSymbol, true
	case codeList0, codeList8, codeList32:
		return TypeList, true
	case codeMap8, codeMap32:
		return TypeMap, true
	case codeArray8, codeArray32:
		return TypeArray, true
	}
	return 0, false
}

func (d *decoder) array(code byte) (Array, error) {
	if err := d.enter(); err != nil {
		return Array{}, err
	}
	defer d.leave()
	count, end, err := d.compoundHeader(code == codeArray32)
	if err != nil {
		return Array{}, err
	}
	var a Array
	err = d.within(end, "array", func() error {
		elem, err := d.u8()
		if err != nil {
			return err
		}
		if elem == codeDescribed {
			if err := d.enter(); err != nil {
				return err
			}
			defer d.leave()
			if a.Descriptor, err = d.value(); err != nil {
				return err
			}
			if elem, err = d.u8(); err != nil {
				return err
			}
		}
		t, ok := elementType(elem)
		if !ok {
			return d.errorf("unknown array element constructor %#02x", elem)
		}
		a.Type = t
		switch w := elementWidth(elem); {
		case w == 0:
			if count > d.zeroWidth {
				return d.errorf("array of %d zero-width elements", count)
			}
			d.zeroWidth -= count
		case w > 0 && count > d.remaining()/w, w < 0 && count > d.remaining():
			return d.errorf("array of %d elements in %d bytes", count, d.remaining())
		}
		if err := d.charge(count * sizeInterface); err != nil {
			return err
		}
		if !d.checkOnly {
			a.Elems = make([]any, count)
		}
		for i := range count {
			v, err := d.valueOf(elem)
			if err != nil {
				return err
			}
			if a.Elems != nil {
				a.Elems[i] = v
			}
		}
		return nil
	})
	return a, err
}

// Typed reads used by the performative and message decoders. Each reads one value,
// constructor included, and fails when the value has another type.

func (d *decoder) typeError(want string, code byte) error {
	d.off--
	return d.errorf("%s expected, found constructor %#02x", want, code)
}

func (d *decoder) readBool() (bool, error) {
	code, err := d.u8()
	if err != nil {
		return false, err
	}
	switch code {
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeBool:
		return d.boolByte()
	}
	return false, d.typeError("boolean", code)
}

func (d *decoder) readUbyte() (uint8, error) {
	code, err := d.u8()
	if err != nil {
		return 0, err
	}
	if code != codeUbyte {
		return 0, d.typeError("ubyte", code)
	}
	return d.u8()
}

func (d *decoder) readUshort() (uint16, error) {
	code, err := d.u8()
	if err != nil {
		return 0, err
	}
	if code != codeUshort {
		return 0, d.typeError("ushort", code)
	}
	return d.u16()
}

func (d *decoder) readUint() (uint32, error) {
	code, err := d.u8()
	if err != nil {
		return 0, err
	}
	switch code {
	case codeUint0:
		return 0, nil
	case codeSmallUint:
		v, err := d.u8()
		return uint32(v), err
	case codeUint:
		return d.u32()
	}
	return 0, d.typeError("uint", code)
}

func (d *decoder) readUlong() (uint64, error) {
	code, err := d.u8()
	if err != nil {
		return 0, err
	}
	switch code {
	case codeUlong0:
		return 0, nil
	case codeSmallUlong:
		v, err := d.u8()
		return uint64(v), err
	case codeUlong:
		return d.u64()
	}
	return 0, d.typeError("ulong", code)
}

func (d *decoder) readTimestamp() (time.Time, error) {
	code, err := d.u8()
	if err != nil {
		return time.Time{}, err
	}
	if code != codeTimestamp {
		return time.Time{}, d.typeError("timestamp", code)
	}
	v, err := d.u64()
	return time.UnixMilli(int64(v)).UTC(), err
}

// peekBinary reads a binary value and returns its bytes without copying them: they are d's.
func (d *decoder) peekBinary() ([]byte, error) {
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	if code != codeVbin8 && code != codeVbin32 {
		return nil, d.typeError("binary", code)
	}
	return d.variable(code == codeVbin32)
}

func (d *decoder) readBinary() ([]byte, error) {
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	if code != codeVbin8 && code != codeVbin32 {
		return nil, d.typeError("binary", code)
	}
	b, err := d.variable(code == codeVbin32)
	if err != nil {
		return nil, err
	}
	return append(make([]byte, 0, len(b)), b...), nil
}

func (d *decoder) readString() (string, error) {
	code, err := d.u8()
	if err != nil {
		return "", err
	}
	if code != codeStr8 && code != codeStr32 {
		return "", d.typeError("string", code)
	}
	return d.stringBody(code == codeStr32)
}

func (d *decoder) readSymbol() (Symbol, error) {
	code, err := d.u8()
	if err != nil {
		return "", err
	}
	if code != codeSym8 && code != codeSym32 {
		return "", d.typeError("symbol", code)
	}
	return d.symbolBody(code == codeSym32)
}

// readSymbols reads a multiple symbol field: one symbol or an array of symbols.
func (d *decoder) readSymbols() ([]Symbol, error) {
	code, err := d.peek()
	if err != nil {
		return nil, err
	}
	if code == codeSym8 || code == codeSym32 {
		s, err := d.readSymbol()
		return []Symbol{s}, err
	}
	d.off++
	if code != codeArray8 && code != codeArray32 {
		return nil, d.typeError("symbol or array of symbols", code)
	}
	a, err := d.array(code)
	if err != nil {
		return nil, err
	}
	if a.Descriptor != nil || (a.Type != TypeSymbol && len(a.Elems) > 0) {
		return nil, d.errorf("array of %s where symbols were expected", a.Type)
	}
	syms := make([]Symbol, len(a.Elems))
	for i, e := range a.Elems {
		syms[i] = e.(Symbol)
	}
	return syms, nil
}

func (d *decoder) readMap() (Map, error) {
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	if code != codeMap8 && code != codeMap32 {
		return nil, d.typeError("map", code)
	}
	return d.mapBody(code)
}

// describedHeader reads the constructor and descriptor of a described value, returning the
// descriptor as a numeric code: symbolic descriptors are mapped through descriptorNames, an
// unknown symbol yields 0 with its name.
func (d *decoder) describedHeader() (code uint64, name Symbol, err error) {
	c, err := d.u8()
	if err != nil {
		return 0, "", err
	}
	if c != codeDescribed {
		return 0, "", d.typeError("described type", c)
	}
	c, err = d.peek()
	if err != nil {
		return 0, "", err
	}
	if c == codeSym8 || c == codeSym32 {
		name, err = d.readSymbol()
		if err != nil {
			return 0, "", err
		}
		return descriptorCodes[name], name, nil
	}
	code, err = d.readUlong()
	return code, "", err
}

// fields reads the fields of a described list in order. Errors are sticky: after the first,
// every read is a no-op and done reports it. A field that is absent (past the list's count)
// or null leaves its destination unchanged (holding its default) and reports false.
type fields struct {
	d   *decoder
	n   int
	end int
	err error
}

// listFields reads the list header of a composite type's value.
func (d *decoder) listFields() fields {
	code, err := d.u8()
	if err != nil {
		return fields{d: d, err: err}
	}
	switch code {
	case codeList0:
		return fields{d: d, end: d.off}
	case codeList8, codeList32:
		count, end, err := d.compoundHeader(code == codeList32)
		if err == nil && count > end-d.off {
			err = d.errorf("list of %d fields in %d bytes", count, end-d.off)
		}
		return fields{d: d, n: count, end: end, err: err}
	}
	return fields{d: d, err: d.typeError("list", code)}
}

// next reports whether the next field is present and not null, consuming a null.
func (f *fields) next() bool {
	if f.err != nil || f.n == 0 {
		return false
	}
	f.n--
	if f.d.off >= f.end {
		f.err = f.d.errorf("field beyond the end of its list")
		return false
	}
	if f.d.b[f.d.off] == codeNull {
		f.d.off++
		return false
	}
	return true
}

func (f *fields) fail(err error) bool {
	if err != nil {
		f.err = err
		return false
	}
	return true
}

// run decodes the next field with read, limited to the list's end.
func (f *fields) run(read func() error) bool {
	if !f.next() {
		return false
	}
	saved := f.d.b
	f.d.b = f.d.b[:f.end]
	err := read()
	f.d.b = saved
	return f.fail(err)
}

func (f *fields) bool(dst *bool) bool {
	return f.run(func() (err error) { *dst, err = f.d.readBool(); return })
}

func (f *fields) ubyte(dst *uint8) bool {
	return f.run(func() (err error) { *dst, err = f.d.readUbyte(); return })
}

func (f *fields) ushort(dst *uint16) bool {
	return f.run(func() (err error) { *dst, err = f.d.readUshort(); return })
}

func (f *fields) uint(dst *uint32) bool {
	return f.run(func() (err error) { *dst, err = f.d.readUint(); return })
}

func (f *fields) uintPtr(dst **uint32) bool {
	var v uint32
	if !f.uint(&v) {
		return false
	}
	*dst = f.d.newUint32(v)
	return true
}

func (f *fields) ulong(dst *uint64) bool {
	return f.run(func() (err error) { *dst, err = f.d.readUlong(); return })
}

// millis reads a milliseconds field (uint) as a duration.
func (f *fields) millis(dst *time.Duration) bool {
	var v uint32
	if !f.uint(&v) {
		return false
	}
	*dst = time.Duration(v) * time.Millisecond
	return true
}

func (f *fields) timestamp(dst *time.Time) bool {
	return f.run(func() (err error) { *dst, err = f.d.readTimestamp(); return })
}

func (f *fields) binary(dst *[]byte) bool {
	return f.run(func() (err error) { *dst, err = f.d.readBinary(); return })
}

func (f *fields) string(dst *string) bool {
	return f.run(func() (err error) { *dst, err = f.d.readString(); return })
}

func (f *fields) symbol(dst *Symbol) bool {
	return f.run(func() (err error) { *dst, err = f.d.readSymbol(); return })
}

func (f *fields) symbols(dst *[]Symbol) bool {
	return f.run(func() (err error) { *dst, err = f.d.readSymbols(); return })
}

func (f *fields) mapField(dst *Map) bool {
	return f.run(func() (err error) { *dst, err = f.d.readMap(); return })
}

func (f *fields) value(dst *any) bool {
	return f.run(func() (err error) { *dst, err = f.d.value(); return })
}

// with decodes the next field with a custom reader.
func (f *fields) with(read func(d *decoder) error) bool {
	return f.run(func() error { return read(f.d) })
}

// required records that a mandatory field was absent or null.
func (f *fields) required(present bool, name string) {
	if !present && f.err == nil {
		f.err = f.d.errorf("mandatory field %s is missing", name)
	}
}

// done skips fields this decoder does not know (added by a later version of the
// specification) and checks the list ended where its size said.
func (f *fields) done() error {
	if f.err != nil {
		return f.err
	}
	for f.n > 0 {
		var skip any
		f.value(&skip)
		if f.err != nil {
			return f.err
		}
		// value consumed a non-null; next consumed nulls and decremented n.
	}
	if f.d.off != f.end {
		return f.d.errorf("%d unused bytes at the end of a list", f.end-f.d.off)
	}
	return nil
}
