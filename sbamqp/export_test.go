package sbamqp

// The request/response nodes' limits, for the tests that hold the connection to them.
const (
	MaxInFlight       = maxInFlight
	MaxPendingReplies = maxPendingReplies
)
