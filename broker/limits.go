package broker

// MaxBrowse bounds the messages one Browse returns.
const MaxBrowse = 1000

// MaxCancelBatch bounds the sequence numbers one cancel names: one transaction deletes them. It
// is far above what one schedule request of small messages returns (a few thousand in the
// size an SDK sends), so what one request scheduled one request can cancel.
const MaxCancelBatch = 100000

// MaxReceiveBatch bounds the messages one Receive takes.
const MaxReceiveBatch = 1000

// Limits on sender-set broker properties (protocol.md §7.1).
const (
	MaxMessageIDLength = 128
	MaxSessionIDLength = 128
)

// MaxAMQPSectionsSize bounds Message.AMQPSections: with the application properties, they are what
// the service's 64 KB limit on a message's header covers.
const MaxAMQPSectionsSize = MaxAllPropertiesSize

// MaxTransferHops bounds an auto-forwarding chain: a message that would be forwarded a fifth
// time is dead-lettered where it is, with MaxTransferHopCountExceeded.
const MaxTransferHops = 4
