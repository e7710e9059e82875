package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Frame types (part 2, section 2.3).
const (
	FrameTypeAMQP uint8 = 0
	FrameTypeSASL uint8 = 1
)

// frameHeaderSize is the size of a frame header without extension (doff = 2).
const frameHeaderSize = 8

// minMaxFrameSize is the smallest max-frame-size a peer may announce (MIN-MAX-FRAME-SIZE).
const minMaxFrameSize = 512

// Protocol headers (part 2, section 2.2; part 5, section 5.3.1).
var (
	headerAMQP = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	headerSASL = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// Frame is one AMQP or SASL frame. Body is nil for an empty frame (a heartbeat). A
// transfer's payload is its Body's Payload.
type Frame struct {
	Type    uint8
	Channel uint16
	Body    Performative
}

// AppendFrame appends the encoding of a frame to dst: the header, the performative and, for a
// *Transfer, its payload. It returns an error wrapping ErrEncode if body cannot be encoded.
func AppendFrame(dst []byte, typ uint8, channel uint16, body Performative) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 2, typ, 0, 0)
	binary.BigEndian.PutUint16(dst[start+6:], channel)
	if body != nil {
		var err error
		if dst, err = body.appendAMQP(dst); err != nil {
			return dst[:start], err
		}
		if t, ok := body.(*Transfer); ok {
			dst = append(dst, t.Payload...)
		}
	}
	size := len(dst) - start
	if uint64(size) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes", ErrEncode, size)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// frameStart appends a frame header whose size frameEnd fills in; between them the caller
// appends the body with a direct (not interface) call, so that the performative, usually a
// local value, does not escape to the heap.
func frameStart(dst []byte, typ uint8, channel uint16) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 2, typ, 0, 0)
	binary.BigEndian.PutUint16(dst[start+6:], channel)
	return dst, start
}

func frameEnd(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// ParseFrame parses the frame at the start of b, which must hold all of it. maxSize bounds
// the frame's size (0: no bound beyond b). It returns the frame and its size. Errors: an
// *Error with condition amqp:connection:framing-error for a bad header or a frame over
// maxSize, an error wrapping ErrMalformed for a body that does not decode, and an error
// matching IsNotImplemented for a well-formed body that is not a performative. A transfer's
// payload aliases b.
func ParseFrame(b []byte, maxSize uint32) (Frame, int, error) {
	size, doff, err := parseFrameHeader(b, maxSize)
	if err != nil {
		return Frame{}, 0, err
	}
	if uint64(len(b)) < uint64(size) {
		return Frame{}, 0, fmt.Errorf("%w: frame of %d bytes, %d available", ErrMalformed, size, len(b))
	}
	f := Frame{Type: b[5], Channel: binary.BigEndian.Uint16(b[6:])}
	body := b[doff:size]
	if len(body) == 0 {
		return f, int(size), nil
	}
	d := newDecoder(body)
	p, err := decodePerformative(&d, f.Type == FrameTypeAMQP, nil)
	if err != nil {
		return Frame{}, 0, err
	}
	if t, ok := p.(*Transfer); ok {
		t.Payload = body[d.off:]
	} else if d.off != len(body) {
		return Frame{}, 0, fmt.Errorf("%w: %d bytes after the performative", ErrMalformed, len(body)-d.off)
	}
	f.Body = p
	return f, int(size), nil
}

// parseFrameHeader checks a frame header and returns the frame's size and data offset.
func parseFrameHeader(h []byte, maxSize uint32) (size uint32, doff int, err error) {
	if len(h) < frameHeaderSize {
		return 0, 0, fmt.Errorf("%w: frame header of %d bytes", ErrMalformed, len(h))
	}
	size = binary.BigEndian.Uint32(h)
	doff = int(h[4]) * 4
	switch {
	case size < frameHeaderSize:
		return 0, 0, Errorf(ErrCondFramingError, "frame size %d is smaller than a frame header", size)
	case maxSize > 0 && size > maxSize:
		return 0, 0, Errorf(ErrCondFramingError, "frame size %d exceeds the maximum %d", size, maxSize)
	case doff < frameHeaderSize || uint32(doff) > size:
		return 0, 0, Errorf(ErrCondFramingError, "data offset %d in a frame of %d bytes", doff, size)
	case h[5] != FrameTypeAMQP && h[5] != FrameTypeSASL:
		return 0, 0, Errorf(ErrCondFramingError, "frame type %d", h[5])
	}
	return size, doff, nil
}

// IsNotImplemented reports whether err is ParseFrame's error for a frame body that is a
// well-formed described value but not a known performative.
func IsNotImplemented(err error) bool {
	var u *unknownPerformativeError
	return errors.As(err, &u)
}

// protocolError maps an error from parsing or handling a peer's frame to the AMQP error that
// closes the connection.
func protocolError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, ErrMalformed):
		return &Error{Condition: ErrCondDecodeError, Description: err.Error()}
	case IsNotImplemented(err):
		return &Error{Condition: ErrCondNotImplemented, Description: err.Error()}
	}
	return &Error{Condition: ErrCondInternalError}
}
