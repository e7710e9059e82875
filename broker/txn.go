package broker

// MaxTransactionMessages is how many messages one transaction may send, as the service allows.
const MaxTransactionMessages = 100

// TxSend is a send a transaction makes when it commits. Numbers, when set, are the numbers
// ReserveSequenceNumbers gave its messages (scheduled through $management, whose reply names
// them before the commit): each message is then known by its number, as SendSequenced's are —
// its sequence number in Entity, or the EnqueuedSequenceNumber of its copies elsewhere.
type TxSend struct {
	Entity   *Entity
	Messages []Message
	Numbers  []int64
}

// TxSettle is a settlement a transaction makes when it commits: Complete, Abandon, Defer or
// DeadLetter.
type TxSettle struct {
	Target  Target
	Request SettleRequest
}

// TxSessionState is a session state a transaction sets when it commits, under the session lock
// it names, which must still be held then.
type TxSessionState struct {
	Entity *Entity
	Lock   SessionLock
	State  []byte
}

// TxWork is the work of one client transaction.
type TxWork struct {
	Sends         []TxSend
	Settles       []TxSettle
	SessionStates []TxSessionState
}

// CheckTxSessionState refuses a session state no lock can make right (as SetSessionState).
func CheckTxSessionState(st TxSessionState) error {
	return CheckSessionState(st.Entity, st.Lock, st.State)
}

// CheckTxSettle refuses, when it is asked, a settlement a transaction cannot make whatever the
// state of its lock.
func CheckTxSettle(st TxSettle) error {
	switch st.Request.Op {
	case Complete, Abandon, Defer, DeadLetter:
	default:
		return BadRequest("A %s is not made in a transaction.", st.Request.Op.noun())
	}
	if err := CheckSettleTarget(st.Target); err != nil {
		return err
	}
	return CheckSettleRequest(st.Target, st.Request)
}
