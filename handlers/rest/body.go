package rest

import (
	"bytes"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
)

// restBody is what REST shows of a message's body. A body of bytes (broker.BodyData) is itself.
// An AMQP body (the sections an AMQP sender wrote) is shown as what a REST client can use: an
// amqp-value holding a string as its UTF-8 bytes, one holding binary as those bytes, data
// sections as their bytes one after another; any other body (an amqp-value of another type,
// amqp-sequence sections) as the AMQP encoding of its sections, as stored. The stored body is
// never changed: an AMQP receiver gets the sections as they were sent.
func restBody(m *broker.Message) []byte {
	if m.BodyType != broker.BodyAMQP {
		return m.Body
	}
	// A body of sections only is a message of its own to the decoder.
	am, err := amqp.Unmarshal(m.Body)
	if err != nil {
		return m.Body // not sections: the store does not read them, so show them as they are
	}
	switch v := am.Value.(type) {
	case string:
		return []byte(v)
	case []byte:
		return v
	}
	if len(am.Data) > 0 {
		return bytes.Join(am.Data, nil)
	}
	return m.Body
}
