package store

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// A message lock token is 16 bytes: 8 random bytes, then the message's sequence number
// (big-endian). The token alone therefore names its message: settlement finds the row by its
// primary key instead of through an index of lock tokens that every lock would have to write,
// and protocols that identify a delivery only by its token (a batch settlement, AMQP's delivery
// tags) need nothing else. The random half makes every delivery's token different and
// unguessable; a token is valid only while it equals the row's lock_token.

// lockTokenSeq returns the sequence number a lock token names.
func lockTokenSeq(token uuid.UUID) int64 {
	return int64(binary.BigEndian.Uint64(token[8:]))
}
