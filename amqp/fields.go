package amqp

import "time"

// Descriptor codes of the described types this package models (domain 0x00000000).
const (
	descOpen          = 0x10
	descBegin         = 0x11
	descAttach        = 0x12
	descFlow          = 0x13
	descTransfer      = 0x14
	descDisposition   = 0x15
	descDetach        = 0x16
	descEnd           = 0x17
	descClose         = 0x18
	descError         = 0x1d
	descReceived      = 0x23
	descAccepted      = 0x24
	descRejected      = 0x25
	descReleased      = 0x26
	descModified      = 0x27
	descSource        = 0x28
	descTarget        = 0x29
	descCoordinator   = 0x30
	descDeclare       = 0x31
	descDischarge     = 0x32
	descDeclared      = 0x33
	descTxnState      = 0x34
	descSASLMechs     = 0x40
	descSASLInit      = 0x41
	descSASLChallenge = 0x42
	descSASLResponse  = 0x43
	descSASLOutcome   = 0x44
	descHeader        = 0x70
	descDeliveryAnn   = 0x71
	descMessageAnn    = 0x72
	descProperties    = 0x73
	descAppProperties = 0x74
	descData          = 0x75
	descSequence      = 0x76
	descValue         = 0x77
	descFooter        = 0x78
)

// descriptorCodes maps the symbolic descriptors a peer may use instead of the numeric ones.
var descriptorCodes = map[Symbol]uint64{
	"amqp:open:list":                           descOpen,
	"amqp:begin:list":                          descBegin,
	"amqp:attach:list":                         descAttach,
	"amqp:flow:list":                           descFlow,
	"amqp:transfer:list":                       descTransfer,
	"amqp:disposition:list":                    descDisposition,
	"amqp:detach:list":                         descDetach,
	"amqp:end:list":                            descEnd,
	"amqp:close:list":                          descClose,
	"amqp:error:list":                          descError,
	"amqp:received:list":                       descReceived,
	"amqp:accepted:list":                       descAccepted,
	"amqp:rejected:list":                       descRejected,
	"amqp:released:list":                       descReleased,
	"amqp:modified:list":                       descModified,
	"amqp:source:list":                         descSource,
	"amqp:target:list":                         descTarget,
	"amqp:coordinator:list":                    descCoordinator,
	"amqp:declare:list":                        descDeclare,
	"amqp:discharge:list":                      descDischarge,
	"amqp:declared:list":                       descDeclared,
	"amqp:transactional-state:list":            descTxnState,
	"amqp:sasl-mechanisms:list":                descSASLMechs,
	"amqp:sasl-init:list":                      descSASLInit,
	"amqp:sasl-challenge:list":                 descSASLChallenge,
	"amqp:sasl-response:list":                  descSASLResponse,
	"amqp:sasl-outcome:list":                   descSASLOutcome,
	"amqp:header:list":                         descHeader,
	"amqp:delivery-annotations:map":            descDeliveryAnn,
	"amqp:message-annotations:map":             descMessageAnn,
	"amqp:properties:list":                     descProperties,
	"amqp:application-properties:map":          descAppProperties,
	"amqp:data:binary":                         descData,
	"amqp:amqp-sequence:list":                  descSequence,
	"amqp:amqp-value:*":                        descValue,
	"amqp:footer:map":                          descFooter,
	"amqp:delete-on-close:list":                0x2b,
	"amqp:delete-on-no-links:list":             0x2c,
	"amqp:delete-on-no-messages:list":          0x2d,
	"amqp:delete-on-no-links-or-messages:list": 0x2e,
}

// fieldWriter appends a described list (a composite type) field by field. Trailing null
// fields are dropped, as the specification allows, and the list takes its smallest form.
// Errors are sticky; finish reports them.
type fieldWriter struct {
	b         []byte
	c         compound
	count     int
	lastEnd   int
	lastCount int
	err       error
}

func beginFields(b []byte, descriptor uint64) fieldWriter {
	b = appendUlong(append(b, codeDescribed), descriptor)
	b, c := beginCompound(b)
	return fieldWriter{b: b, c: c, lastEnd: len(b)}
}

func (w *fieldWriter) present() {
	w.count++
	w.lastEnd = len(w.b)
	w.lastCount = w.count
}

func (w *fieldWriter) null() {
	w.count++
	w.b = append(w.b, codeNull)
}

// nullKept writes a null that is kept even as the last field: for clients that index the fields
// of a list they expect whole (the pure-Python client reads an error's info as its third field).
func (w *fieldWriter) nullKept() {
	w.b = append(w.b, codeNull)
	w.present()
}

func (w *fieldWriter) finish() ([]byte, error) {
	if w.err != nil {
		return w.b, w.err
	}
	return w.c.end(w.b[:w.lastEnd], w.lastCount, codeList8, codeList32, codeList0)
}

func (w *fieldWriter) uint(v uint32) {
	w.b = appendUint(w.b, v)
	w.present()
}

func (w *fieldWriter) uintPtr(v *uint32) {
	if v == nil {
		w.null()
		return
	}
	w.uint(*v)
}

func (w *fieldWriter) ulong(v uint64) {
	w.b = appendUlong(w.b, v)
	w.present()
}

func (w *fieldWriter) ulongOpt(v uint64) {
	if v == 0 {
		w.null()
		return
	}
	w.ulong(v)
}

func (w *fieldWriter) ubyte(v uint8) {
	w.b = append(w.b, codeUbyte, v)
	w.present()
}

func (w *fieldWriter) ushort(v uint16) {
	w.b = appendUshort(w.b, v)
	w.present()
}

func (w *fieldWriter) bool(v bool) {
	w.b = appendBool(w.b, v)
	w.present()
}

// boolOpt writes a boolean whose default is false, as null when false.
func (w *fieldWriter) boolOpt(v bool) {
	if !v {
		w.null()
		return
	}
	w.bool(true)
}

func (w *fieldWriter) boolPtr(v *bool) {
	if v == nil {
		w.null()
		return
	}
	w.bool(*v)
}

func (w *fieldWriter) millis(d time.Duration) {
	if d <= 0 {
		w.null()
		return
	}
	ms := d.Milliseconds()
	if ms > int64(^uint32(0)) {
		ms = int64(^uint32(0))
	}
	w.uint(uint32(ms))
}

func (w *fieldWriter) timestamp(t time.Time) {
	if t.IsZero() {
		w.null()
		return
	}
	w.b = appendTimestamp(w.b, t)
	w.present()
}

func (w *fieldWriter) string(s string) {
	if w.err == nil {
		w.b, w.err = appendString(w.b, s)
	}
	w.present()
}

func (w *fieldWriter) stringOpt(s string) {
	if s == "" {
		w.null()
		return
	}
	w.string(s)
}

func (w *fieldWriter) symbol(s Symbol) {
	if w.err == nil {
		w.b, w.err = appendSymbol(w.b, s)
	}
	w.present()
}

func (w *fieldWriter) symbolOpt(s Symbol) {
	if s == "" {
		w.null()
		return
	}
	w.symbol(s)
}

// symbols writes a multiple symbol field as an array (null when empty).
func (w *fieldWriter) symbols(s []Symbol) {
	if len(s) == 0 {
		w.null()
		return
	}
	w.value(s)
}

func (w *fieldWriter) binary(v []byte) {
	if w.err == nil {
		w.b, w.err = appendBinary(w.b, v)
	}
	w.present()
}

func (w *fieldWriter) binaryOpt(v []byte) {
	if v == nil {
		w.null()
		return
	}
	w.binary(v)
}

func (w *fieldWriter) mapOpt(m Map) {
	if m == nil {
		w.null()
		return
	}
	w.value(m)
}

// value writes any value, null included (nil is written as null and trimmed if trailing).
func (w *fieldWriter) value(v any) {
	if v == nil {
		w.null()
		return
	}
	if w.err == nil {
		w.b, w.err = appendValue(w.b, v, 1)
	}
	w.present()
}

// encoded writes a described field (terminus, error, state) or null.
func (w *fieldWriter) encoded(e encoder, isNil bool) {
	if isNil {
		w.null()
		return
	}
	if w.err == nil {
		w.b, w.err = e.appendAMQP(w.b)
	}
	w.present()
}
