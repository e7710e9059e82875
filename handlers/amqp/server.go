// Package amqp is the AMQP door: the Service Bus profile of AMQP 1.0 (docs/amqp.md) on the
// protocol engine of the top-level package amqp, over the same broker.Store as its sibling
// handlers/rest, the REST door: what the Service Bus SDKs (Go azservicebus,
// npm @azure/service-bus) use to send and receive.
//
// A connection authenticates with SASL ANONYMOUS, then authorizes each entity with put-token
// on the $cbs node (a SAS token, checked as over HTTP: a namespace key or a key of the entity,
// unexpired, covering the entity, with the right the link needs), or with SASL PLAIN (a key
// name and key, namespace-wide, for clients without CBS). Links to an entity send (Send
// right) or receive (Listen right); receive links run in peek-lock (the peer settles second)
// or receive-and-delete (the peer asked for settled deliveries) and take messages from the
// store as the peer grants credit. Dispositions settle locks: accepted completes, rejected
// dead-letters, modified abandons (or defers when undeliverable-here), released unlocks
// without counting the delivery.
//
// Session receivers attach with the session filter (a session id, or null for the next
// available); the attach reply names the session and its lock end. The $management node
// answers renew-lock, peek-message, receive-by-sequence-number,
// update-disposition, renew-session-lock, get-session-state, set-session-state,
// schedule-message and cancel-scheduled-message (the last two refused on a topic or an
// auto-forwarding queue, whose copies live elsewhere). Refused with amqp:not-implemented or a 501
// reply, never ignored: modifying properties on settlement, transactions, and the other
// unsupported forms docs/amqp.md lists.
package amqp

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// Config configures a Handler.
type Config struct {
	// Store is the broker's store.
	Store broker.Store
	// Access decides who may do what (the same layer as the REST handlers'): the keys, token
	// checks, refusal texts. Required.
	Access *access.Layer
	// MaxReceiveWait is the longest one store receive waits before a receive link asks again
	// (default 1 minute); the link keeps waiting for as long as the peer grants credit.
	MaxReceiveWait time.Duration
	// TransactionTimeout is how long a transaction may run from its first operation to its
	// discharge before it is rolled back (default DefaultTransactionTimeout, the service's).
	TransactionTimeout time.Duration
	// Logger receives errors that reach no client.
	Logger *slog.Logger
}

// Handler implements amqp.Handler with the Service Bus profile.
type Handler struct {
	cfg    Config
	log    *slog.Logger
	access *access.Layer
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.MaxReceiveWait <= 0 {
		cfg.MaxReceiveWait = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = DefaultTransactionTimeout
	}
	if cfg.Access == nil {
		cfg.Access = access.New(access.Config{Source: cfg.Store}) // no namespace key: entity keys only
	}
	return &Handler{cfg: cfg, log: cfg.Logger, access: cfg.Access}
}

// Authenticate decides SASL exchanges (amqp.Options.Authenticate): MSSBCBS and ANONYMOUS are
// accepted and must then authorize with $cbs; PLAIN must name a namespace key and give its
// primary or secondary key, and authorizes the whole namespace with that key's rights.
func (h *Handler) Authenticate(ctx context.Context, cred amqp.SASLCredentials) (any, error) {
	if cred.Mechanism != "PLAIN" {
		return nil, nil
	}
	g, err := h.access.VerifyPlain(ctx, cred.Identity, cred.Password)
	if err != nil {
		return nil, err
	}
	return plainPrincipal{g}, nil
}

// plainPrincipal is the principal of a connection that authenticated with SASL PLAIN.
type plainPrincipal struct{ grant access.Grant }

// Connect implements amqp.Handler. Each connection checks its grants again every key refresh
// (watch): a revoked or rotated key's links are detached, a PLAIN connection's closed.
func (h *Handler) Connect(c *amqp.Conn) (amqp.ConnHandler, error) {
	cs := &conn{h: h, c: c, pending: map[*amqp.SenderLink][][]byte{}, inflight: make(chan struct{}, maxInFlight),
		links: map[any]linkAuth{}}
	if p, ok := c.Principal().(plainPrincipal); ok {
		cs.plain = &p.grant
	}
	go cs.watch()
	return cs, nil
}

// conn is the state of one connection. The amqp.ConnHandler methods run one at a time on the
// engine's dispatcher; mu guards what the handler's own goroutines touch too.
type conn struct {
	h     *Handler
	c     *amqp.Conn
	plain *access.Grant

	mu     sync.Mutex
	grants map[string]access.Grant // by audience, lower-cased
	// links are the entity links the connection holds, with what authorizes each, so a key's
	// revocation detaches them (watch).
	links map[any]linkAuth
	// sessions are the session locks held by the connection's links, by entity and session id.
	sessions map[string]broker.SessionLock
	// linkSessions are the same locks by the name of the link that holds each.
	linkSessions map[string]broker.SessionLock
	// releasing holds, per session, a channel closed once a release under way is done.
	releasing map[string]chan struct{}
	// pending holds replies of request/response nodes, encoded, that met a reply link without
	// credit.
	pending map[*amqp.SenderLink][][]byte
	// inflight holds a token for each request of the connection being run (request).
	inflight chan struct{}
	// txns are the transactions declared on the connection and not yet discharged.
	txns txns
}

// linkAuth is what an entity link needs to stay authorized: the right on the path, and how to
// detach it when that ends.
type linkAuth struct {
	path   string
	need   sas.Rights
	detach func(*amqp.Error) error
}

// track registers an entity link (key: the link) for watch; untrack forgets it.
func (cs *conn) track(key any, path string, need sas.Rights, detach func(*amqp.Error) error) {
	cs.mu.Lock()
	cs.links[key] = linkAuth{path: path, need: need, detach: detach}
	cs.mu.Unlock()
}

func (cs *conn) untrack(key any) {
	cs.mu.Lock()
	delete(cs.links, key)
	cs.mu.Unlock()
}

// watch checks the connection's grants every key refresh until the connection ends: a grant
// whose key was revoked, rotated or lost the rights is dropped, and every link it authorized
// alone is detached with amqp:unauthorized-access; a PLAIN connection whose key went is closed.
func (cs *conn) watch() {
	ctx := cs.c.Context()
	t := time.NewTicker(cs.h.access.Refresh())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cs.recheck(ctx)
	}
}

// recheck is one round of watch.
func (cs *conn) recheck(ctx context.Context) {
	a := cs.h.access
	if cs.plain != nil {
		if !a.Valid(ctx, *cs.plain) {
			_ = cs.c.Close(amqp.Errorf(condUnauthorized, "The key '%s' the connection authenticated with was revoked or rotated.", broker.Clip(cs.plain.KeyName)))
		}
		return
	}
	cs.mu.Lock()
	var revoked []string
	for aud, g := range cs.grants {
		if !a.Valid(ctx, g) {
			delete(cs.grants, aud)
			revoked = append(revoked, g.KeyName)
		}
	}
	links := make([]linkAuth, 0, len(cs.links))
	for _, l := range cs.links {
		links = append(links, l)
	}
	cs.mu.Unlock()
	if len(revoked) == 0 {
		return
	}
	for _, l := range links {
		if aerr := cs.authorize(l.need, l.path); aerr != nil {
			_ = l.detach(amqp.Errorf(condUnauthorized, "The key that authorized this link was revoked or rotated: %s", aerr.Description))
		}
	}
}

// authorize checks that the connection may use an entity with right need: a PLAIN key with the
// right, or an unexpired put-token grant with it covering one of paths — the entity's path, and
// for its management operations also "<entity>/$management", the audience the SDKs authorize
// their management links with.
func (cs *conn) authorize(need sas.Rights, paths ...string) *amqp.Error {
	a := cs.h.access
	if cs.plain != nil {
		if err := a.Allows(*cs.plain, "", paths[0], need, paths[0]); err != nil {
			return amqp.Errorf(condUnauthorized, "%s", err.Error())
		}
		return nil
	}
	host := cs.c.Hostname()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var refusal error
	for _, g := range cs.grants {
		for _, p := range paths {
			err := a.Allows(g, host, p, need, paths[0])
			if err == nil {
				return nil
			}
			if g.Covers(host, p) {
				refusal = err // expired, or without the right: says more than "no token"
			}
		}
	}
	if refusal != nil {
		return amqp.Errorf(condUnauthorized, "%s", refusal.Error())
	}
	return amqp.Errorf(condUnauthorized, "Unauthorized access: no token authorizes '%s'; put a token for it on $cbs first.", broker.Clip(paths[0]))
}

// rcvFirst is the receiver settle mode of every link on which sbgate receives (entity senders,
// $cbs, $management): it settles each delivery at once with a settled disposition, as the
// service does. uAMQP and the pure-Python client complete a send only on a settled disposition,
// and go-amqp asks for first and checks the echo.
var rcvFirst = amqp.ReceiverSettleModeFirst

// Attach routes a link by its address: $cbs, an entity's $management node, or an entity. A
// transaction coordinator is served by the connection (txn.go).
func (cs *conn) Attach(req *amqp.AttachRequest) {
	if req.PeerRole() == amqp.RoleSender {
		addr := req.TargetAddress()
		switch {
		case req.Attach().Coordinator != nil:
			cs.attachCoordinator(req)
		case addr == cbsNode:
			_, _ = req.AcceptReceiver(&cbsReceiver{cs: cs}, amqp.ReceiverOptions{RcvSettleMode: &rcvFirst, Credit: requestCredit})
		case isManagement(addr) && !access.ValidPath(managementEntity(addr)):
			_ = req.Refuse(amqp.Errorf(condNotFound, "The messaging entity '%s' could not be found.", broker.Clip(managementEntity(addr))))
		case isManagement(addr):
			_, _ = req.AcceptReceiver(&managementReceiver{cs: cs, path: managementEntity(addr)}, amqp.ReceiverOptions{RcvSettleMode: &rcvFirst, Credit: requestCredit})
		default:
			go cs.attachEntitySender(req)
		}
		return
	}
	addr := req.SourceAddress()
	switch {
	case isManagement(addr) && !access.ValidPath(managementEntity(addr)):
		_ = req.Refuse(amqp.Errorf(condNotFound, "The messaging entity '%s' could not be found.", broker.Clip(managementEntity(addr))))
	case addr == cbsNode, isManagement(addr):
		_, _ = req.AcceptSender(&replySender{cs: cs}, amqp.SenderOptions{})
	default:
		go cs.attachEntityReceiver(req)
	}
}

func isManagement(addr string) bool {
	return strings.HasSuffix(strings.ToLower(addr), "/$management")
}

// managementEntity is the entity path of a $management node address.
func managementEntity(addr string) string {
	p, sq := entityAddress(addr[:len(addr)-len("/$management")])
	if sq == broker.SubQueueDeadLetter {
		p += "/$DeadLetterQueue"
	}
	return p
}

// SessionEnded implements amqp.ConnHandler; links end first and clean up themselves.
func (cs *conn) SessionEnded(*amqp.Session, error) {}

// Closed implements amqp.ConnHandler: the connection's open transactions are rolled back.
func (cs *conn) Closed(error) {
	cs.rollbackAll(func(*txn) bool { return true }, "its connection closed")
}

// Limits of the request/response nodes ($cbs, $management) of one connection: requestCredit
// is the credit of each request link (requests taken and not yet settled), maxInFlight the
// requests the connection runs at once (a request waits for a slot before it is taken), and
// maxPendingReplies the replies one reply link may hold that wait for its credit; a reply link
// that lets more pile up is detached with amqp:resource-limit-exceeded.
const (
	requestCredit     = 64
	maxInFlight       = 32
	maxPendingReplies = 256
)

// request runs one request of a request/response node: it settles the delivery, runs do on a
// goroutine (at most maxInFlight per connection: the dispatcher waits for a slot, which slows a
// peer that floods requests rather than spawning goroutines for it) and sends the reply do
// returns with the request's message-id as its correlation-id, of the same AMQP type (the SDKs
// compare them by value and type: a ulong counter, an int, a string, a uuid), on the reply link
// (see amqp.Conn.ReplyLink). what names the request in the rejection of one that does not decode.
// A reply that cannot be encoded (a value no AMQP type carries: a broker bug) is replaced by
// failed's answer for the error, so the peer is answered rather than left waiting. It reports
// whether do runs (not when the request does not decode, or the connection ended first).
func (cs *conn) request(l *amqp.ReceiverLink, d *amqp.Delivery, what string, do func(ctx context.Context, m *amqp.Message) *amqp.Message,
	failed func(err error) *amqp.Message) (started bool) {
	m, err := d.Message()
	if err != nil {
		_ = d.Reject(&amqp.Error{Condition: amqp.ErrCondDecodeError, Description: what + " is not a valid message."})
		return false
	}
	_ = d.Accept()
	var replyTo string
	var id any
	if m.Properties != nil {
		replyTo, id = m.Properties.ReplyTo, m.Properties.MessageID
	}
	ctx := l.Conn().Context()
	select {
	case cs.inflight <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	go func() {
		defer func() { <-cs.inflight }()
		reply := do(ctx, m)
		payload, err := encodeReply(reply, id)
		if err != nil {
			cs.h.log.Error("amqp: a reply could not be encoded", "request", what, "err", err)
			if payload, err = encodeReply(failed(err), id); err != nil {
				cs.h.log.Error("amqp: the error reply could not be encoded either", "request", what, "err", err)
				return
			}
		}
		cs.reply(replyTo, l, payload)
	}()
	return true
}

// encodeReply encodes reply with the correlation-id id.
func encodeReply(reply *amqp.Message, id any) ([]byte, error) {
	if reply.Properties == nil {
		reply.Properties = &amqp.Properties{}
	}
	reply.Properties.CorrelationID = id
	return amqp.Marshal(reply)
}

// reply sends m on the reply link of a request that came on link from, or keeps it until the
// link has credit.
func (cs *conn) reply(replyTo string, from *amqp.ReceiverLink, m []byte) {
	l := cs.c.ReplyLink(replyTo, from)
	if l == nil {
		cs.h.log.Debug("amqp reply dropped: no reply link", "reply_to", broker.Clip(replyTo), "request_link", broker.Clip(from.Name()))
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.pending[l]) >= maxPendingReplies {
		delete(cs.pending, l)
		_ = l.Detach(amqp.Errorf(condResourceLimit, "More than %d replies wait for credit on this link.", maxPendingReplies))
		return
	}
	cs.pending[l] = append(cs.pending[l], m)
	cs.flushLocked(l)
}

func (cs *conn) flushLocked(l *amqp.SenderLink) {
	q := cs.pending[l]
	for len(q) > 0 {
		_, err := l.Send(cs.c.Context(), nil, q[0], &amqp.SendOptions{Settled: true})
		if errors.Is(err, amqp.ErrNoCredit) {
			break
		}
		if err != nil {
			cs.h.log.Debug("amqp reply not sent", "link", broker.Clip(l.Name()), "err", err)
		}
		q[0] = nil
		q = q[1:]
	}
	if len(q) == 0 {
		delete(cs.pending, l)
	} else {
		cs.pending[l] = q
	}
}

// replySender is a link on which replies of $cbs (and later $management) go.
type replySender struct{ cs *conn }

func (r *replySender) Flow(l *amqp.SenderLink, credit uint32, drain bool) {
	r.cs.mu.Lock()
	r.cs.flushLocked(l)
	r.cs.mu.Unlock()
	if drain {
		l.CompleteDrain()
	}
}

func (r *replySender) Disposition(_ *amqp.SenderLink, d *amqp.OutgoingDelivery, state amqp.DeliveryState, settled bool) {
	if !settled {
		_ = d.Settle(state)
	}
}

func (r *replySender) SenderDetached(l *amqp.SenderLink, _ error) {
	r.cs.mu.Lock()
	delete(r.cs.pending, l)
	r.cs.mu.Unlock()
}
