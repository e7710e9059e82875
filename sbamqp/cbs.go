package sbamqp

import (
	"context"
	"errors"
	"strings"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

const cbsNode = "$cbs"

// cbsReceiver takes put-token requests on the $cbs node (docs/amqp.md §2).
type cbsReceiver struct{ cs *conn }

func (r *cbsReceiver) Deliver(l *amqp.ReceiverLink, d *amqp.Delivery) {
	m, err := d.Message()
	if err != nil {
		_ = d.Reject(&amqp.Error{Condition: amqp.ErrCondDecodeError, Description: "The put-token request is not a valid message."})
		return
	}
	_ = d.Accept()
	var replyTo string
	var id any
	if m.Properties != nil {
		replyTo, id = m.Properties.ReplyTo, m.Properties.MessageID
	}
	go func() {
		status, desc := r.cs.putToken(l.Conn().Context(), m)
		r.cs.reply(replyTo, &amqp.Message{
			Properties: &amqp.Properties{CorrelationID: id},
			ApplicationProperties: amqp.Map{
				{Key: "status-code", Value: status},
				{Key: "status-description", Value: desc},
			},
		})
	}()
}

func (r *cbsReceiver) ReceiverDetached(*amqp.ReceiverLink, error) {}

// putToken checks a put-token request and records its grant. It returns the reply's status
// code (an AMQP int, as the SDKs want) and description.
func (cs *conn) putToken(ctx context.Context, m *amqp.Message) (int32, string) {
	str := func(k string) string {
		v, _ := m.ApplicationProperties.Get(k)
		s, _ := v.(string)
		return s
	}
	if op := str("operation"); op != "put-token" {
		return 400, "The $cbs operation '" + op + "' is not supported; use put-token."
	}
	if typ := str("type"); typ != "servicebus.windows.net:sastoken" {
		return 400, "The token type '" + typ + "' is not supported; use servicebus.windows.net:sastoken."
	}
	audience := str("name")
	var text string
	switch v := m.Value.(type) {
	case string:
		text = v
	case []byte:
		text = string(v)
	}
	if text == "" && len(m.Data) == 1 {
		text = string(m.Data[0])
	}
	tok, err := sas.ParseToken(text)
	if err != nil {
		return 401, tokenErrorText(err)
	}
	path := audiencePath(audience, false)
	key, err := tok.Verify(cs.h.cfg.Keys(ctx), cs.h.cfg.Now(), cs.h.cfg.ClockSkew)
	if errors.Is(err, sas.ErrUnknownKey) {
		key, err = cs.verifyEntityKey(ctx, path, tok)
	}
	if err != nil {
		return 401, tokenErrorText(err)
	}
	if full := audiencePath(audience, true); !tok.Covers(full) {
		return 401, "InvalidAudience: The token's resource does not cover '" + full + "'."
	}
	cs.mu.Lock()
	if cs.grants == nil {
		cs.grants = map[string]grant{}
	}
	cs.grants[strings.ToLower(audience)] = grant{tok: tok, rights: key.Rights}
	cs.mu.Unlock()
	return 202, "Accepted"
}

// audiencePath is the entity path of a put-token audience: "amqp://host:port/q",
// "sb://host/q/$management" or a bare path. Unless keepNode, the $management suffix is dropped
// (to find the entity whose keys may have signed the token).
func audiencePath(audience string, keepNode bool) string {
	p := audience
	if _, rest, ok := strings.Cut(p, "://"); ok {
		if _, path, ok := strings.Cut(rest, "/"); ok {
			p = path
		} else {
			p = ""
		}
	}
	p = strings.Trim(p, "/")
	if i := strings.LastIndex(strings.ToLower(p), "/$management"); !keepNode && i >= 0 && i == len(p)-len("/$management") {
		p = p[:i]
	}
	return p
}

// verifyEntityKey checks tok against the keys of the queue or topic at path (a subscription's
// are its topic's), as the HTTP handlers do.
func (cs *conn) verifyEntityKey(ctx context.Context, path string, tok sas.Token) (sas.Key, error) {
	entity, _ := splitSubQueue(path)
	if topic, _, ok := store.SplitSubscriptionPath(entity); ok {
		entity = topic
	}
	if entity == "" {
		return sas.Key{}, sas.ErrUnknownKey
	}
	e, err := cs.h.cfg.Store.Resolve(ctx, entity)
	if err != nil {
		return sas.Key{}, sas.ErrUnknownKey
	}
	keys := make([]sas.Key, 0, len(e.Props.AuthorizationRules))
	for _, rule := range e.Props.AuthorizationRules {
		rights, err := sas.ParseRights(rule.Rights)
		if err != nil {
			continue
		}
		keys = append(keys, sas.Key{Name: rule.KeyName, Primary: rule.PrimaryKey, Secondary: rule.SecondaryKey, Rights: rights})
	}
	if len(keys) == 0 {
		return sas.Key{}, sas.ErrUnknownKey
	}
	return tok.Verify(keys, cs.h.cfg.Now(), cs.h.cfg.ClockSkew)
}

// tokenErrorText is the description of a token error: the sas sentinels carry the service's
// texts; malformed tokens a fixed text that never echoes the token.
func tokenErrorText(err error) string {
	for _, sentinel := range []error{sas.ErrMissingToken, sas.ErrUnsupportedScheme, sas.ErrUnknownKey,
		sas.ErrInvalidSignature, sas.ErrExpiredToken} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return err.Error()
}

const deadLetterSuffix = "/$deadletterqueue"

// splitSubQueue splits a "…/$DeadLetterQueue" address into its entity and subqueue.
func splitSubQueue(path string) (string, store.SubQueue) {
	if len(path) > len(deadLetterSuffix) && strings.EqualFold(path[len(path)-len(deadLetterSuffix):], deadLetterSuffix) {
		return path[:len(path)-len(deadLetterSuffix)], store.SubQueueDeadLetter
	}
	return path, store.SubQueueMain
}
