package amqp

import (
	"fmt"
	"time"
)

// MessageFormatBatch is the message format of a Service Bus batch: a transfer whose message
// carries, in each of its data sections, one encoded message.
const MessageFormatBatch uint32 = 0x80013700

// Message is an AMQP message (part 3, section 3.2): the bare message and its annotations.
//
// Absent sections are nil. The body is one of: one or more Data sections, one or more
// Sequence sections, or one amqp-value section (Value, present when Value is not nil or
// HasValue is set, so that a null amqp-value can be represented). A message with none of
// them has no body.
type Message struct {
	Header                *Header
	DeliveryAnnotations   Map
	MessageAnnotations    Map
	Properties            *Properties
	ApplicationProperties Map
	Data                  [][]byte
	Sequence              []List
	Value                 any
	// HasValue marks an amqp-value section; Unmarshal sets it for every amqp-value, null or
	// not.
	HasValue bool
	// RawBody is the body sections as encoded: Unmarshal sets it, beside their decoded form in
	// Data, Sequence or Value, to the bytes of every body section exactly as the peer sent
	// them (nil when the message has no body). When it is not nil, Marshal writes it as the
	// body in place of Data, Sequence and Value, so a body can travel on without being
	// decoded and encoded again, which could change its bytes (a long that fits a byte is
	// re-encoded as smalllong, a map8 may have come as map32). It must hold body sections only
	// (data, amqp-sequence or amqp-value, of one kind), as Unmarshal gives them; Marshal does
	// not check. Unmarshal's Data share its memory.
	RawBody []byte
	Footer  Map
}

// Header is the header section (section 3.2.1). Decoding fills Priority's default, 4.
type Header struct {
	Durable       bool
	Priority      uint8
	TTL           time.Duration // to the millisecond; 0 means none
	FirstAcquirer bool
	DeliveryCount uint32
}

// Properties is the properties section (section 3.2.4). MessageID and CorrelationID hold a
// uint64, a UUID, a []byte or a string as the specification allows, or another scalar some
// clients send instead (an int64, an int32, a Symbol…: see readMessageID), or nil when absent;
// strings are "" and times zero when absent.
type Properties struct {
	MessageID          any
	UserID             []byte
	To                 string
	Subject            string
	ReplyTo            string
	CorrelationID      any
	ContentType        Symbol
	ContentEncoding    Symbol
	AbsoluteExpiryTime time.Time
	CreationTime       time.Time
	GroupID            string
	// HasGroupID marks a group-id that is present even when GroupID is "": an empty group-id
	// is a group (a Service Bus session) of its own, not the absence of one. Unmarshal sets it
	// for every group-id it reads; Marshal writes GroupID when it is not "" or HasGroupID is
	// set.
	HasGroupID     bool
	GroupSequence  *uint32
	ReplyToGroupID string
}

// Marshal encodes m. It returns an error wrapping ErrEncode when a value in m has no AMQP
// representation or a message id is not of an allowed type.
func Marshal(m *Message) ([]byte, error) {
	return AppendMessage(nil, m)
}

// AppendMessage appends the encoding of m to dst; see Marshal.
func AppendMessage(dst []byte, m *Message) ([]byte, error) {
	b := dst
	var err error
	if h := m.Header; h != nil {
		if b, err = appendHeader(b, h); err != nil {
			return dst, err
		}
	}
	if b, err = appendMapSection(b, descDeliveryAnn, m.DeliveryAnnotations); err != nil {
		return dst, err
	}
	if b, err = appendMapSection(b, descMessageAnn, m.MessageAnnotations); err != nil {
		return dst, err
	}
	if p := m.Properties; p != nil {
		if b, err = appendProperties(b, p); err != nil {
			return dst, err
		}
	}
	if b, err = appendMapSection(b, descAppProperties, m.ApplicationProperties); err != nil {
		return dst, err
	}
	if m.RawBody != nil {
		b = append(b, m.RawBody...)
	} else if b, err = appendBody(b, m); err != nil {
		return dst, err
	}
	if b, err = appendMapSection(b, descFooter, m.Footer); err != nil {
		return dst, err
	}
	return b, nil
}

// appendHeader appends the header section h.
func appendHeader(b []byte, h *Header) ([]byte, error) {
	w := beginFields(b, descHeader)
	w.boolOpt(h.Durable)
	if h.Priority == 4 {
		w.null()
	} else {
		w.ubyte(h.Priority)
	}
	w.millis(h.TTL)
	w.boolOpt(h.FirstAcquirer)
	// Written even when 0: the pure-Python client fills absent header fields with None,
	// not the specification's defaults, and reports a first delivery's count as None.
	w.uint(h.DeliveryCount)
	return w.finish()
}

// appendProperties appends the properties section p, once its message ids are checked.
func appendProperties(b []byte, p *Properties) ([]byte, error) {
	if err := checkMessageID(p.MessageID); err != nil {
		return b, fmt.Errorf("message-id: %w", err)
	}
	if err := checkMessageID(p.CorrelationID); err != nil {
		return b, fmt.Errorf("correlation-id: %w", err)
	}
	w := beginFields(b, descProperties)
	w.value(p.MessageID)
	w.binaryOpt(p.UserID)
	w.stringOpt(p.To)
	w.stringOpt(p.Subject)
	w.stringOpt(p.ReplyTo)
	w.value(p.CorrelationID)
	w.symbolOpt(p.ContentType)
	w.symbolOpt(p.ContentEncoding)
	w.timestamp(p.AbsoluteExpiryTime)
	w.timestamp(p.CreationTime)
	if p.HasGroupID && p.GroupID == "" {
		w.value("")
	} else {
		w.stringOpt(p.GroupID)
	}
	w.uintPtr(p.GroupSequence)
	w.stringOpt(p.ReplyToGroupID)
	return w.finish()
}

// appendBody appends the body sections of a message built from Data, Sequence or Value (not
// RawBody): one kind of them only.
func appendBody(b []byte, m *Message) ([]byte, error) {
	if n := bodyKinds(m); n > 1 {
		return b, fmt.Errorf("%w: a message body is data, amqp-sequence or amqp-value sections, not a mix",
			ErrEncode)
	}
	var err error
	for _, data := range m.Data {
		b = appendUlong(append(b, codeDescribed), descData)
		if b, err = appendBinary(b, data); err != nil {
			return b, err
		}
	}
	for _, seq := range m.Sequence {
		b = appendUlong(append(b, codeDescribed), descSequence)
		if b, err = appendList(b, seq, 0); err != nil {
			return b, err
		}
	}
	if m.Value != nil || m.HasValue {
		b = appendUlong(append(b, codeDescribed), descValue)
		if b, err = appendValue(b, m.Value, 0); err != nil {
			return b, err
		}
	}
	return b, nil
}

func bodyKinds(m *Message) int {
	n := 0
	if len(m.Data) > 0 {
		n++
	}
	if len(m.Sequence) > 0 {
		n++
	}
	if m.Value != nil || m.HasValue {
		n++
	}
	return n
}

// checkMessageID accepts what readMessageID yields: any scalar, so a reply's correlation-id can
// be the request's message-id with its type.
func checkMessageID(id any) error {
	switch id.(type) {
	case nil, uint64, UUID, []byte, string, Symbol, uint8, uint16, uint32, int8, int16, int32, int64,
		float32, float64, bool, Char, time.Time, Decimal32, Decimal64, Decimal128:
		return nil
	}
	return fmt.Errorf("%w: message id of Go type %T (want a scalar: uint64, UUID, []byte, string…)", ErrEncode, id)
}

func appendMapSection(b []byte, descriptor uint64, m Map) ([]byte, error) {
	if m == nil {
		return b, nil
	}
	b = appendUlong(append(b, codeDescribed), descriptor)
	return appendMap(b, m, 0)
}

// Unmarshal decodes an encoded message: a sequence of sections in the order the
// specification sets, each at most once except data and amqp-sequence sections. Errors wrap
// ErrMalformed. The message shares no memory with data; its RawBody holds the body sections as
// they were encoded, and its Data are slices of RawBody.
func Unmarshal(data []byte) (*Message, error) { return unmarshal(data, false) }

// UnmarshalKeepingBody is Unmarshal for a message whose body is only to be kept as it was
// encoded, as a broker keeps it: amqp-value and amqp-sequence sections are checked as
// Unmarshal checks them but not built, so Value and Sequence stay empty (HasValue is set for
// an amqp-value) and the body is in RawBody (and Data) only. What such a body holds then costs
// no memory beyond its bytes, whatever its shape: a well-formed list of a million booleans,
// which Unmarshal's decoding budget refuses (16 bytes of Go value a byte), is accepted.
func UnmarshalKeepingBody(data []byte) (*Message, error) { return unmarshal(data, true) }

func unmarshal(data []byte, keepBody bool) (*Message, error) {
	d := newDecoder(data)
	m := new(Message)
	last := uint64(0)
	// Where the body sections begin and end in data, and where each data section's bytes are.
	bodyStart, bodyEnd := -1, -1
	var dataAt [][2]int
	for d.remaining() > 0 {
		start := d.off
		code, name, err := d.describedHeader()
		if err != nil {
			return nil, err
		}
		if code < descHeader || code > descFooter {
			return nil, d.errorf("message section with descriptor %#x %q", code, name)
		}
		if err := d.checkSectionOrder(code, last); err != nil {
			return nil, err
		}
		last = code
		if err := d.enter(); err != nil {
			return nil, err
		}
		switch code {
		case descHeader:
			m.Header, err = d.readHeader()
		case descDeliveryAnn:
			m.DeliveryAnnotations, err = d.readMapSection()
		case descMessageAnn:
			m.MessageAnnotations, err = d.readMapSection()
		case descProperties:
			m.Properties, err = d.readProperties()
		case descAppProperties:
			m.ApplicationProperties, err = d.readMapSection()
		case descData:
			var b []byte
			if b, err = d.peekBinary(); err == nil {
				end := d.off
				dataAt = append(dataAt, [2]int{end - len(b), end})
			}
		case descSequence:
			var l List
			if l, err = d.readSequence(keepBody); err == nil && !keepBody {
				m.Sequence = append(m.Sequence, l)
			}
		case descValue:
			m.Value, err = d.readValue(keepBody)
			m.HasValue = true
		case descFooter:
			m.Footer, err = d.readMapSection()
		}
		d.leave()
		if err != nil {
			return nil, err
		}
		if code >= descData && code <= descValue {
			if bodyStart < 0 {
				bodyStart = start
			}
			bodyEnd = d.off
		}
	}
	if bodyStart >= 0 {
		m.RawBody = append(make([]byte, 0, bodyEnd-bodyStart), data[bodyStart:bodyEnd]...)
		for _, at := range dataAt {
			s, e := at[0]-bodyStart, at[1]-bodyStart
			m.Data = append(m.Data, m.RawBody[s:e:e])
		}
	}
	return m, nil
}

// checkSectionOrder refuses a section with descriptor code after one with last: sections come
// in the specification's order, each once except data and amqp-sequence sections, and a body
// is of one kind.
func (d *decoder) checkSectionOrder(code, last uint64) error {
	repeatable := (code == descData || code == descSequence) && code == last
	switch {
	case code < last, code == last && !repeatable:
		return d.errorf("message section %#x after %#x", code, last)
	case last >= descData && last <= descValue && code >= descData && code <= descValue && code != last:
		return d.errorf("message body mixes section %#x and %#x", last, code)
	}
	return nil
}

// readSequence reads an amqp-sequence section's list; with checkOnly it only checks it.
func (d *decoder) readSequence(checkOnly bool) (List, error) {
	d.checkOnly = checkOnly
	v, err := d.value()
	d.checkOnly = false
	if err != nil {
		return nil, err
	}
	l, ok := v.(List)
	if !ok {
		return nil, d.errorf("amqp-sequence section holding %T", v)
	}
	return l, nil
}

// readValue reads an amqp-value section's value; with checkOnly it only checks it and returns
// nil.
func (d *decoder) readValue(checkOnly bool) (any, error) {
	d.checkOnly = checkOnly
	v, err := d.value()
	d.checkOnly = false
	if checkOnly {
		v = nil
	}
	return v, err
}

// readMapSection reads an annotations or application-properties map; null reads as empty.
func (d *decoder) readMapSection() (Map, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	if c == codeNull {
		d.off++
		return Map{}, nil
	}
	return d.readMap()
}

func (d *decoder) readHeader() (*Header, error) {
	h := &Header{Priority: 4}
	if c, err := d.peek(); err == nil && c == codeNull {
		d.off++
		return h, nil
	}
	f := d.listFields()
	f.bool(&h.Durable)
	f.ubyte(&h.Priority)
	f.millis(&h.TTL)
	f.bool(&h.FirstAcquirer)
	f.uint(&h.DeliveryCount)
	return h, f.done()
}

func (d *decoder) readProperties() (*Properties, error) {
	p := new(Properties)
	if c, err := d.peek(); err == nil && c == codeNull {
		d.off++
		return p, nil
	}
	f := d.listFields()
	f.with(func(d *decoder) (err error) { p.MessageID, err = d.readMessageID(); return })
	f.binary(&p.UserID)
	f.with(func(d *decoder) (err error) { p.To, err = d.readAddress(); return })
	f.string(&p.Subject)
	f.with(func(d *decoder) (err error) { p.ReplyTo, err = d.readAddress(); return })
	f.with(func(d *decoder) (err error) { p.CorrelationID, err = d.readMessageID(); return })
	f.symbol(&p.ContentType)
	f.symbol(&p.ContentEncoding)
	f.timestamp(&p.AbsoluteExpiryTime)
	f.timestamp(&p.CreationTime)
	p.HasGroupID = f.string(&p.GroupID)
	f.uintPtr(&p.GroupSequence)
	f.string(&p.ReplyToGroupID)
	return p, f.done()
}

// readMessageID reads a message-id or correlation-id. The specification allows ulong, uuid,
// binary or string; clients send others too (the pure-Python client numbers its requests with a
// Python int, encoded as a long or an int), and a request/response node must answer with a
// correlation-id of the very type it got. So any scalar is read as what it is; a compound or
// described value is refused.
func (d *decoder) readMessageID() (any, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	switch c {
	case codeUlong0, codeSmallUlong, codeUlong:
		return d.readUlong()
	case codeDescribed, codeList0, codeList8, codeList32, codeMap8, codeMap32, codeArray8, codeArray32:
		d.off++
		return nil, d.typeError("message id (a scalar: ulong, uuid, binary, string or another number)", c)
	}
	return d.value()
}
