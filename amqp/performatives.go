package amqp

import (
	"fmt"
	"math"
	"time"
)

// Performative is the body of an AMQP or SASL frame: *Open, *Begin, *Attach, *Flow,
// *Transfer, *Disposition, *Detach, *End, *Close, *SASLMechanisms, *SASLInit,
// *SASLChallenge, *SASLResponse or *SASLOutcome.
type Performative interface {
	encoder
	descriptor() uint64
}

// Role is a link endpoint's role: RoleSender (false on the wire) or RoleReceiver (true).
type Role bool

// The link roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

func (r Role) String() string {
	if r == RoleReceiver {
		return "receiver"
	}
	return "sender"
}

// SenderSettleMode is the settlement policy of a link's sender.
type SenderSettleMode uint8

// The sender settle modes.
const (
	// SenderSettleModeUnsettled: the sender sends every delivery unsettled.
	SenderSettleModeUnsettled SenderSettleMode = 0
	// SenderSettleModeSettled: the sender sends every delivery settled.
	SenderSettleModeSettled SenderSettleMode = 1
	// SenderSettleModeMixed: the sender chooses per delivery (the default).
	SenderSettleModeMixed SenderSettleMode = 2
)

// Ptr returns a pointer to m, for the optional fields of SenderOptions and ReceiverOptions.
func (m SenderSettleMode) Ptr() *SenderSettleMode { return &m }

// ReceiverSettleMode is the settlement policy of a link's receiver.
type ReceiverSettleMode uint8

// The receiver settle modes.
const (
	// ReceiverSettleModeFirst: the receiver settles as soon as it decides the outcome.
	ReceiverSettleModeFirst ReceiverSettleMode = 0
	// ReceiverSettleModeSecond: the receiver sends the outcome unsettled and settles only
	// once the sender has settled.
	ReceiverSettleModeSecond ReceiverSettleMode = 1
)

// Ptr returns a pointer to m, for the optional fields of SenderOptions and ReceiverOptions.
func (m ReceiverSettleMode) Ptr() *ReceiverSettleMode { return &m }

// Open is the first performative of a connection (section 2.7.1). Decoding fills the
// defaults of absent fields (MaxFrameSize 4294967295, ChannelMax 65535).
type Open struct {
	ContainerID         string
	Hostname            string
	MaxFrameSize        uint32
	ChannelMax          uint16
	IdleTimeout         time.Duration // to the millisecond; 0 means none
	OutgoingLocales     []Symbol
	IncomingLocales     []Symbol
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

func (*Open) descriptor() uint64 { return descOpen }

func (o *Open) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descOpen)
	w.string(o.ContainerID)
	w.stringOpt(o.Hostname)
	w.uint(o.MaxFrameSize)
	w.ushort(o.ChannelMax)
	w.millis(o.IdleTimeout)
	w.symbols(o.OutgoingLocales)
	w.symbols(o.IncomingLocales)
	w.symbols(o.OfferedCapabilities)
	w.symbols(o.DesiredCapabilities)
	w.mapOpt(o.Properties)
	return w.finish()
}

func (o *Open) decode(f *fields) error {
	*o = Open{MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}
	f.required(f.string(&o.ContainerID), "container-id")
	f.string(&o.Hostname)
	f.uint(&o.MaxFrameSize)
	f.ushort(&o.ChannelMax)
	f.millis(&o.IdleTimeout)
	f.symbols(&o.OutgoingLocales)
	f.symbols(&o.IncomingLocales)
	f.symbols(&o.OfferedCapabilities)
	f.symbols(&o.DesiredCapabilities)
	f.mapField(&o.Properties)
	return f.done()
}

// Begin starts a session (section 2.7.2). Decoding fills HandleMax's default (4294967295).
type Begin struct {
	RemoteChannel       *uint16
	NextOutgoingID      uint32
	IncomingWindow      uint32
	OutgoingWindow      uint32
	HandleMax           uint32
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

func (*Begin) descriptor() uint64 { return descBegin }

func (p *Begin) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descBegin)
	if p.RemoteChannel == nil {
		w.null()
	} else {
		w.ushort(*p.RemoteChannel)
	}
	w.uint(p.NextOutgoingID)
	w.uint(p.IncomingWindow)
	w.uint(p.OutgoingWindow)
	w.uint(p.HandleMax)
	w.symbols(p.OfferedCapabilities)
	w.symbols(p.DesiredCapabilities)
	w.mapOpt(p.Properties)
	return w.finish()
}

func (p *Begin) decode(f *fields) error {
	*p = Begin{HandleMax: math.MaxUint32}
	var ch uint16
	if f.ushort(&ch) {
		p.RemoteChannel = &ch
	}
	f.required(f.uint(&p.NextOutgoingID), "next-outgoing-id")
	f.required(f.uint(&p.IncomingWindow), "incoming-window")
	f.required(f.uint(&p.OutgoingWindow), "outgoing-window")
	f.uint(&p.HandleMax)
	f.symbols(&p.OfferedCapabilities)
	f.symbols(&p.DesiredCapabilities)
	f.mapField(&p.Properties)
	return f.done()
}

// Attach attaches a link to a session (section 2.7.3). Source and Target are nil when
// absent; a transaction coordinator target decodes into Coordinator instead of Target.
// Decoding fills SndSettleMode's default (mixed).
type Attach struct {
	Name                 string
	Handle               uint32
	Role                 Role
	SndSettleMode        SenderSettleMode
	RcvSettleMode        ReceiverSettleMode
	Source               *Source
	Target               *Target
	Coordinator          *Coordinator
	Unsettled            Map
	IncompleteUnsettled  bool
	InitialDeliveryCount *uint32
	MaxMessageSize       uint64 // 0 means no limit
	OfferedCapabilities  []Symbol
	DesiredCapabilities  []Symbol
	Properties           Map
}

func (*Attach) descriptor() uint64 { return descAttach }

func (p *Attach) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descAttach)
	w.string(p.Name)
	w.uint(p.Handle)
	w.bool(bool(p.Role))
	w.ubyte(uint8(p.SndSettleMode))
	w.ubyte(uint8(p.RcvSettleMode))
	w.encoded(p.Source, p.Source == nil)
	switch {
	case p.Target != nil:
		w.encoded(p.Target, false)
	case p.Coordinator != nil:
		w.encoded(p.Coordinator, false)
	default:
		w.null()
	}
	w.mapOpt(p.Unsettled)
	w.boolOpt(p.IncompleteUnsettled)
	w.uintPtr(p.InitialDeliveryCount)
	w.ulongOpt(p.MaxMessageSize)
	w.symbols(p.OfferedCapabilities)
	w.symbols(p.DesiredCapabilities)
	w.mapOpt(p.Properties)
	return w.finish()
}

func (p *Attach) decode(f *fields) error {
	*p = Attach{SndSettleMode: SenderSettleModeMixed}
	f.required(f.string(&p.Name), "name")
	f.required(f.uint(&p.Handle), "handle")
	var role bool
	f.required(f.bool(&role), "role")
	p.Role = Role(role)
	var ssm, rsm uint8 = uint8(SenderSettleModeMixed), uint8(ReceiverSettleModeFirst)
	f.ubyte(&ssm)
	f.ubyte(&rsm)
	if f.err == nil && (ssm > uint8(SenderSettleModeMixed) || rsm > uint8(ReceiverSettleModeSecond)) {
		f.err = f.d.errorf("settle modes %d/%d out of range", ssm, rsm)
	}
	p.SndSettleMode, p.RcvSettleMode = SenderSettleMode(ssm), ReceiverSettleMode(rsm)
	f.with(func(d *decoder) error {
		p.Source = new(Source)
		return p.Source.decode(d)
	})
	f.with(func(d *decoder) error {
		code, name, err := d.describedHeader()
		if err != nil {
			return err
		}
		switch code {
		case descTarget:
			p.Target = new(Target)
			fl := d.listFields()
			return p.Target.decodeFields(&fl)
		case descCoordinator:
			p.Coordinator = new(Coordinator)
			fl := d.listFields()
			fl.symbols(&p.Coordinator.Capabilities)
			return fl.done()
		}
		return d.errorf("target with descriptor %#x %q", code, name)
	})
	f.mapField(&p.Unsettled)
	f.bool(&p.IncompleteUnsettled)
	f.uintPtr(&p.InitialDeliveryCount)
	f.ulong(&p.MaxMessageSize)
	f.symbols(&p.OfferedCapabilities)
	f.symbols(&p.DesiredCapabilities)
	f.mapField(&p.Properties)
	return f.done()
}

// Source is a link's source terminus (part 3, section 3.5.3). Address is "" when absent.
// ExpiryPolicy is "" when absent (meaning session-end).
type Source struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32 // seconds
	Dynamic               bool
	DynamicNodeProperties Map
	DistributionMode      Symbol
	// Filter maps filter names (symbols) to filters, usually Described values; Service
	// Bus's session filter is com.microsoft:session-filter.
	Filter         Map
	DefaultOutcome DeliveryState
	Outcomes       []Symbol
	Capabilities   []Symbol
}

func (s *Source) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descSource)
	w.stringOpt(s.Address)
	if s.Durable == 0 {
		w.null()
	} else {
		w.uint(s.Durable)
	}
	w.symbolOpt(s.ExpiryPolicy)
	if s.Timeout == 0 {
		w.null()
	} else {
		w.uint(s.Timeout)
	}
	w.boolOpt(s.Dynamic)
	w.mapOpt(s.DynamicNodeProperties)
	w.symbolOpt(s.DistributionMode)
	w.mapOpt(s.Filter)
	w.encoded(s.DefaultOutcome, s.DefaultOutcome == nil)
	w.symbols(s.Outcomes)
	w.symbols(s.Capabilities)
	return w.finish()
}

// decode reads a source, constructor included.
func (s *Source) decode(d *decoder) error {
	code, name, err := d.describedHeader()
	if err != nil {
		return err
	}
	if code != descSource {
		return d.errorf("source with descriptor %#x %q", code, name)
	}
	f := d.listFields()
	f.with(func(d *decoder) (err error) { s.Address, err = d.readAddress(); return })
	f.uint(&s.Durable)
	f.symbol(&s.ExpiryPolicy)
	f.uint(&s.Timeout)
	f.bool(&s.Dynamic)
	f.mapField(&s.DynamicNodeProperties)
	f.symbol(&s.DistributionMode)
	f.mapField(&s.Filter)
	f.with(func(d *decoder) (err error) { s.DefaultOutcome, err = d.readDeliveryState(); return })
	f.symbols(&s.Outcomes)
	f.symbols(&s.Capabilities)
	return f.done()
}

// Target is a link's target terminus (part 3, section 3.5.4). Address is "" when absent.
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties Map
	Capabilities          []Symbol
}

func (t *Target) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descTarget)
	w.stringOpt(t.Address)
	if t.Durable == 0 {
		w.null()
	} else {
		w.uint(t.Durable)
	}
	w.symbolOpt(t.ExpiryPolicy)
	if t.Timeout == 0 {
		w.null()
	} else {
		w.uint(t.Timeout)
	}
	w.boolOpt(t.Dynamic)
	w.mapOpt(t.DynamicNodeProperties)
	w.symbols(t.Capabilities)
	return w.finish()
}

func (t *Target) decodeFields(f *fields) error {
	f.with(func(d *decoder) (err error) { t.Address, err = d.readAddress(); return })
	f.uint(&t.Durable)
	f.symbol(&t.ExpiryPolicy)
	f.uint(&t.Timeout)
	f.bool(&t.Dynamic)
	f.mapField(&t.DynamicNodeProperties)
	f.symbols(&t.Capabilities)
	return f.done()
}

// Coordinator is the target of a link to a transaction coordinator (part 4). The engine
// decodes it so that the handler can refuse such a link cleanly.
type Coordinator struct {
	Capabilities []Symbol
}

func (c *Coordinator) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descCoordinator)
	w.symbols(c.Capabilities)
	return w.finish()
}

// readAddress reads a terminus address: a string (a symbol is tolerated).
func (d *decoder) readAddress() (string, error) {
	code, err := d.peek()
	if err != nil {
		return "", err
	}
	if code == codeSym8 || code == codeSym32 {
		s, err := d.readSymbol()
		return string(s), err
	}
	return d.readString()
}

// Flow updates session and link flow control state (section 2.7.4).
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32
	NextOutgoingID uint32
	OutgoingWindow uint32
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
	Properties     Map
}

func (*Flow) descriptor() uint64 { return descFlow }

func (p *Flow) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descFlow)
	w.uintPtr(p.NextIncomingID)
	w.uint(p.IncomingWindow)
	w.uint(p.NextOutgoingID)
	w.uint(p.OutgoingWindow)
	w.uintPtr(p.Handle)
	w.uintPtr(p.DeliveryCount)
	w.uintPtr(p.LinkCredit)
	w.uintPtr(p.Available)
	w.boolOpt(p.Drain)
	w.boolOpt(p.Echo)
	w.mapOpt(p.Properties)
	return w.finish()
}

func (p *Flow) decode(f *fields) error {
	*p = Flow{}
	f.uintPtr(&p.NextIncomingID)
	f.required(f.uint(&p.IncomingWindow), "incoming-window")
	f.required(f.uint(&p.NextOutgoingID), "next-outgoing-id")
	f.required(f.uint(&p.OutgoingWindow), "outgoing-window")
	f.uintPtr(&p.Handle)
	f.uintPtr(&p.DeliveryCount)
	f.uintPtr(&p.LinkCredit)
	f.uintPtr(&p.Available)
	f.bool(&p.Drain)
	f.bool(&p.Echo)
	f.mapField(&p.Properties)
	return f.done()
}

// Transfer carries (part of) a delivery (section 2.7.5). Payload is the frame's payload,
// the bytes after the performative; it is not a field of the performative.
type Transfer struct {
	Handle        uint32
	DeliveryID    *uint32
	DeliveryTag   []byte
	MessageFormat *uint32
	Settled       *bool
	More          bool
	RcvSettleMode *ReceiverSettleMode
	State         DeliveryState
	Resume        bool
	Aborted       bool
	Batchable     bool
	Payload       []byte
}

func (*Transfer) descriptor() uint64 { return descTransfer }

func (p *Transfer) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descTransfer)
	w.uint(p.Handle)
	w.uintPtr(p.DeliveryID)
	w.binaryOpt(p.DeliveryTag)
	w.uintPtr(p.MessageFormat)
	w.boolPtr(p.Settled)
	w.boolOpt(p.More)
	if p.RcvSettleMode == nil {
		w.null()
	} else {
		w.ubyte(uint8(*p.RcvSettleMode))
	}
	w.encoded(p.State, p.State == nil)
	w.boolOpt(p.Resume)
	w.boolOpt(p.Aborted)
	w.boolOpt(p.Batchable)
	return w.finish()
}

func (p *Transfer) decode(f *fields) error {
	*p = Transfer{}
	f.required(f.uint(&p.Handle), "handle")
	f.uintPtr(&p.DeliveryID)
	f.binary(&p.DeliveryTag)
	f.uintPtr(&p.MessageFormat)
	var settled bool
	if f.bool(&settled) {
		p.Settled = f.d.newBool(settled)
	}
	f.bool(&p.More)
	var rsm uint8
	if f.ubyte(&rsm) {
		if rsm > uint8(ReceiverSettleModeSecond) && f.err == nil {
			f.err = f.d.errorf("rcv-settle-mode %d out of range", rsm)
		}
		m := ReceiverSettleMode(rsm)
		p.RcvSettleMode = &m
	}
	f.with(func(d *decoder) (err error) { p.State, err = d.readDeliveryState(); return })
	f.bool(&p.Resume)
	f.bool(&p.Aborted)
	f.bool(&p.Batchable)
	return f.done()
}

// Disposition informs the peer of delivery state changes for deliveries first to last
// (section 2.7.6). Last nil means First only.
type Disposition struct {
	Role      Role
	First     uint32
	Last      *uint32
	Settled   bool
	State     DeliveryState
	Batchable bool
}

func (*Disposition) descriptor() uint64 { return descDisposition }

func (p *Disposition) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descDisposition)
	w.bool(bool(p.Role))
	w.uint(p.First)
	w.uintPtr(p.Last)
	w.boolOpt(p.Settled)
	w.encoded(p.State, p.State == nil)
	w.boolOpt(p.Batchable)
	return w.finish()
}

func (p *Disposition) decode(f *fields) error {
	*p = Disposition{}
	var role bool
	f.required(f.bool(&role), "role")
	p.Role = Role(role)
	f.required(f.uint(&p.First), "first")
	f.uintPtr(&p.Last)
	f.bool(&p.Settled)
	f.with(func(d *decoder) (err error) { p.State, err = d.readDeliveryState(); return })
	f.bool(&p.Batchable)
	return f.done()
}

// Detach detaches a link (section 2.7.7).
type Detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

func (*Detach) descriptor() uint64 { return descDetach }

func (p *Detach) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descDetach)
	w.uint(p.Handle)
	w.boolOpt(p.Closed)
	w.encoded(p.Error, p.Error == nil)
	return w.finish()
}

func (p *Detach) decode(f *fields) error {
	*p = Detach{}
	f.required(f.uint(&p.Handle), "handle")
	f.bool(&p.Closed)
	f.with(func(d *decoder) (err error) { p.Error, err = d.readError(); return })
	return f.done()
}

// End ends a session (section 2.7.8).
type End struct {
	Error *Error
}

func (*End) descriptor() uint64 { return descEnd }

func (p *End) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descEnd)
	w.encoded(p.Error, p.Error == nil)
	return w.finish()
}

func (p *End) decode(f *fields) error {
	*p = End{}
	f.with(func(d *decoder) (err error) { p.Error, err = d.readError(); return })
	return f.done()
}

// Close closes a connection (section 2.7.9).
type Close struct {
	Error *Error
}

func (*Close) descriptor() uint64 { return descClose }

func (p *Close) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descClose)
	w.encoded(p.Error, p.Error == nil)
	return w.finish()
}

func (p *Close) decode(f *fields) error {
	*p = Close{}
	f.with(func(d *decoder) (err error) { p.Error, err = d.readError(); return })
	return f.done()
}

func (e *Error) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descError)
	w.symbol(e.Condition)
	w.stringOpt(clipError(e).Description)
	if e.Info == nil {
		// All three fields, info null: the pure-Python client reads info as the third field
		// of every error and fails (hanging the send that got it) when it is missing.
		w.nullKept()
	} else {
		w.mapOpt(e.Info)
	}
	return w.finish()
}

// readError reads an error, constructor included.
func (d *decoder) readError() (*Error, error) {
	code, name, err := d.describedHeader()
	if err != nil {
		return nil, err
	}
	if code != descError {
		return nil, d.errorf("error with descriptor %#x %q", code, name)
	}
	var e Error
	f := d.listFields()
	f.required(f.symbol(&e.Condition), "condition")
	f.string(&e.Description)
	f.mapField(&e.Info)
	return &e, f.done()
}

// DeliveryState is the state of a delivery: Accepted, Rejected, Released, Modified (the
// outcomes), Received, or for transactions (part 4) Declared and TransactionalState.
type DeliveryState interface {
	encoder
	deliveryState()
}

// Accepted is the outcome of a message processed successfully.
type Accepted struct{}

// Rejected is the outcome of a message that is invalid and cannot be processed.
type Rejected struct {
	Error *Error
}

// Released is the outcome of a message not (and never to be) processed; it is to be
// delivered again, its delivery count not incremented.
type Released struct{}

// Modified is the outcome of a message that was not processed; DeliveryFailed asks that its
// delivery count be incremented, UndeliverableHere that it not be delivered to this link
// again, and MessageAnnotations are merged into the message's.
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations Map
}

// Received is the non-terminal state of a partially received delivery.
type Received struct {
	SectionNumber uint32
	SectionOffset uint64
}

// Declared is the outcome of a transaction declare (part 4): the id of the transaction.
type Declared struct {
	TxnID []byte
}

// TransactionalState is the state of a delivery that is part of a transaction (part 4): on a
// transfer, a message sent in transaction TxnID (Outcome nil); on a disposition, the outcome
// the settlement takes when the transaction commits.
type TransactionalState struct {
	TxnID   []byte
	Outcome DeliveryState
}

func (Declared) deliveryState()           {}
func (TransactionalState) deliveryState() {}
func (Accepted) deliveryState()           {}
func (Rejected) deliveryState()           {}
func (Released) deliveryState()           {}
func (Modified) deliveryState()           {}
func (Received) deliveryState()           {}

func (Accepted) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descAccepted)
	return w.finish()
}

func (s Rejected) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descRejected)
	w.encoded(s.Error, s.Error == nil)
	return w.finish()
}

func (Released) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descReleased)
	return w.finish()
}

func (s Modified) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descModified)
	w.boolOpt(s.DeliveryFailed)
	w.boolOpt(s.UndeliverableHere)
	w.mapOpt(s.MessageAnnotations)
	return w.finish()
}

func (s Declared) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descDeclared)
	w.binary(s.TxnID)
	return w.finish()
}

func (s TransactionalState) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descTxnState)
	w.binary(s.TxnID)
	w.encoded(s.Outcome, s.Outcome == nil)
	return w.finish()
}

func (s Received) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descReceived)
	w.uint(s.SectionNumber)
	w.ulong(s.SectionOffset)
	return w.finish()
}

// readDeliveryState reads a delivery state or outcome, constructor included.
func (d *decoder) readDeliveryState() (DeliveryState, error) {
	code, name, err := d.describedHeader()
	if err != nil {
		return nil, err
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	f := d.listFields()
	switch code {
	case descAccepted:
		return Accepted{}, f.done()
	case descReleased:
		return Released{}, f.done()
	case descRejected:
		var s Rejected
		f.with(func(d *decoder) (err error) { s.Error, err = d.readError(); return })
		return s, f.done()
	case descModified:
		var s Modified
		f.bool(&s.DeliveryFailed)
		f.bool(&s.UndeliverableHere)
		f.mapField(&s.MessageAnnotations)
		return s, f.done()
	case descDeclared:
		var s Declared
		f.required(f.binary(&s.TxnID), "txn-id")
		return s, f.done()
	case descTxnState:
		var s TransactionalState
		f.required(f.binary(&s.TxnID), "txn-id")
		f.with(func(d *decoder) (err error) {
			if s.Outcome, err = d.readDeliveryState(); err == nil {
				if _, nested := s.Outcome.(TransactionalState); nested {
					err = d.errorf("transactional-state inside a transactional-state")
				}
			}
			return
		})
		return s, f.done()
	case descReceived:
		var s Received
		f.required(f.uint(&s.SectionNumber), "section-number")
		f.required(f.ulong(&s.SectionOffset), "section-offset")
		return s, f.done()
	}
	return nil, d.errorf("delivery state with descriptor %#x %q", code, name)
}

// SASL performatives (part 5, section 5.3.3).

// SASLMechanisms advertises the server's SASL mechanisms.
type SASLMechanisms struct {
	Mechanisms []Symbol
}

func (*SASLMechanisms) descriptor() uint64 { return descSASLMechs }

func (p *SASLMechanisms) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descSASLMechs)
	if len(p.Mechanisms) == 0 {
		w.value(Array{Type: TypeSymbol})
	} else {
		w.symbols(p.Mechanisms)
	}
	return w.finish()
}

func (p *SASLMechanisms) decode(f *fields) error {
	*p = SASLMechanisms{}
	f.required(f.symbols(&p.Mechanisms), "sasl-server-mechanisms")
	return f.done()
}

// SASLInit selects a mechanism and carries the client's initial response.
type SASLInit struct {
	Mechanism       Symbol
	InitialResponse []byte
	Hostname        string
}

func (*SASLInit) descriptor() uint64 { return descSASLInit }

func (p *SASLInit) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descSASLInit)
	w.symbol(p.Mechanism)
	w.binaryOpt(p.InitialResponse)
	w.stringOpt(p.Hostname)
	return w.finish()
}

func (p *SASLInit) decode(f *fields) error {
	*p = SASLInit{}
	f.required(f.symbol(&p.Mechanism), "mechanism")
	f.binary(&p.InitialResponse)
	f.string(&p.Hostname)
	return f.done()
}

// SASLChallenge carries a server challenge.
type SASLChallenge struct {
	Challenge []byte
}

func (*SASLChallenge) descriptor() uint64 { return descSASLChallenge }

func (p *SASLChallenge) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descSASLChallenge)
	w.binary(p.Challenge)
	return w.finish()
}

func (p *SASLChallenge) decode(f *fields) error {
	*p = SASLChallenge{}
	f.required(f.binary(&p.Challenge), "challenge")
	return f.done()
}

// SASLResponse carries a client response to a challenge.
type SASLResponse struct {
	Response []byte
}

func (*SASLResponse) descriptor() uint64 { return descSASLResponse }

func (p *SASLResponse) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descSASLResponse)
	w.binary(p.Response)
	return w.finish()
}

func (p *SASLResponse) decode(f *fields) error {
	*p = SASLResponse{}
	f.required(f.binary(&p.Response), "response")
	return f.done()
}

// SASLCode is the outcome of a SASL exchange.
type SASLCode uint8

// The SASL outcome codes.
const (
	SASLOK      SASLCode = 0 // authentication succeeded
	SASLAuth    SASLCode = 1 // failed: bad credentials
	SASLSys     SASLCode = 2 // failed: system error
	SASLSysPerm SASLCode = 3 // failed: unrecoverable system error
	SASLSysTemp SASLCode = 4 // failed: transient system error
)

// SASLOutcome ends a SASL exchange.
type SASLOutcome struct {
	Code           SASLCode
	AdditionalData []byte
}

func (*SASLOutcome) descriptor() uint64 { return descSASLOutcome }

func (p *SASLOutcome) appendAMQP(b []byte) ([]byte, error) {
	w := beginFields(b, descSASLOutcome)
	w.ubyte(uint8(p.Code))
	w.binaryOpt(p.AdditionalData)
	return w.finish()
}

func (p *SASLOutcome) decode(f *fields) error {
	*p = SASLOutcome{}
	var code uint8
	f.required(f.ubyte(&code), "code")
	p.Code = SASLCode(code)
	f.binary(&p.AdditionalData)
	return f.done()
}

// decodePerformative decodes a frame body. amqp selects the AMQP performatives (frame type
// 0) or the SASL ones (frame type 1). An unknown descriptor yields errUnknownPerformative.
// scr, when not nil, supplies reusable values for the frequent transfer, flow and
// disposition, which are then valid until its next use. Optional scalar fields point into
// d, valid as long as d.
func decodePerformative(d *decoder, amqp bool, scr *scratch) (Performative, error) {
	code, name, err := d.describedHeader()
	if err != nil {
		return nil, err
	}
	var p interface {
		Performative
		decode(*fields) error
	}
	switch {
	case amqp && code == descOpen:
		p = new(Open)
	case amqp && code == descBegin:
		p = new(Begin)
	case amqp && code == descAttach:
		p = new(Attach)
	case amqp && code == descFlow && scr != nil:
		p = &scr.flow
	case amqp && code == descFlow:
		p = new(Flow)
	case amqp && code == descTransfer && scr != nil:
		p = &scr.transfer
	case amqp && code == descTransfer:
		p = new(Transfer)
	case amqp && code == descDisposition && scr != nil:
		p = &scr.disposition
	case amqp && code == descDisposition:
		p = new(Disposition)
	case amqp && code == descDetach:
		p = new(Detach)
	case amqp && code == descEnd:
		p = new(End)
	case amqp && code == descClose:
		p = new(Close)
	case !amqp && code == descSASLMechs:
		p = new(SASLMechanisms)
	case !amqp && code == descSASLInit:
		p = new(SASLInit)
	case !amqp && code == descSASLChallenge:
		p = new(SASLChallenge)
	case !amqp && code == descSASLResponse:
		p = new(SASLResponse)
	case !amqp && code == descSASLOutcome:
		p = new(SASLOutcome)
	default:
		return nil, &unknownPerformativeError{code: code, name: name}
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	f := d.listFields()
	// Concrete calls, not p.decode(&f): through the interface f would escape to the heap
	// on every frame.
	switch p := p.(type) {
	case *Open:
		err = p.decode(&f)
	case *Begin:
		err = p.decode(&f)
	case *Attach:
		err = p.decode(&f)
	case *Flow:
		err = p.decode(&f)
	case *Transfer:
		err = p.decode(&f)
	case *Disposition:
		err = p.decode(&f)
	case *Detach:
		err = p.decode(&f)
	case *End:
		err = p.decode(&f)
	case *Close:
		err = p.decode(&f)
	case *SASLMechanisms:
		err = p.decode(&f)
	case *SASLInit:
		err = p.decode(&f)
	case *SASLChallenge:
		err = p.decode(&f)
	case *SASLResponse:
		err = p.decode(&f)
	case *SASLOutcome:
		err = p.decode(&f)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// unknownPerformativeError reports a well-formed described frame body that is not a
// performative of the frame's type; the server answers it with amqp:not-implemented.
type unknownPerformativeError struct {
	code uint64
	name Symbol
}

func (e *unknownPerformativeError) Error() string {
	if e.name != "" {
		return fmt.Sprintf("amqp: unknown performative %q", e.name)
	}
	return fmt.Sprintf("amqp: unknown performative %#x", e.code)
}
