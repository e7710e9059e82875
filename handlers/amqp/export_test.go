package amqp

// The request/response nodes' limits, for the tests that hold the connection to them.
const (
	MaxInFlight       = maxInFlight
	MaxPendingReplies = maxPendingReplies
)

// MaxOpenTxns is how many transactions one connection may hold open.
const MaxOpenTxns = maxOpenTxns
