package sbamqp

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

const cbsNode = "$cbs"

// Token types of put-token: a SAS token, or a "JSON web token" — what the SDKs send for a token
// credential (Go's and .NET's TokenCredential, Java's and Python's credential objects). sbgate
// checks both as SAS tokens: the Entra ID tokens a service would take in the second are not
// supported, and a SAS token handed out by a token credential is sent as jwt.
const (
	tokenTypeSAS = "servicebus.windows.net:sastoken"
	tokenTypeJWT = "jwt"
)

// cbsReceiver takes put-token requests on the $cbs node (docs/amqp.md §2).
type cbsReceiver struct{ cs *conn }

func (r *cbsReceiver) Deliver(l *amqp.ReceiverLink, d *amqp.Delivery) {
	r.cs.request(l, d, "The put-token request", func(ctx context.Context, m *amqp.Message) *amqp.Message {
		status, desc := r.cs.putToken(ctx, m)
		return &amqp.Message{ApplicationProperties: amqp.Map{
			{Key: "status-code", Value: status},
			{Key: "status-description", Value: desc},
		}}
	})
}

func (r *cbsReceiver) ReceiverDetached(*amqp.ReceiverLink, error) {}

// putToken checks a put-token request and records its grant. It returns the reply's status
// code (an AMQP int, as every SDK reads it) and description: 202 for an accepted token, 400 for
// a request that is not a put-token of a known type, 401 for a token that does not verify or does
// not cover its audience, 404 for an audience naming an entity that does not exist (how the SDKs
// learn of a missing entity at connect time).
func (cs *conn) putToken(ctx context.Context, m *amqp.Message) (int32, string) {
	str := func(k string) string {
		v, _ := m.ApplicationProperties.Get(k)
		switch v := v.(type) {
		case string:
			return v
		case amqp.Symbol:
			return string(v)
		}
		return ""
	}
	if op := str("operation"); op != "put-token" {
		return 400, "The $cbs operation '" + store.Clip(op) + "' is not supported; use put-token."
	}
	if typ := str("type"); typ != tokenTypeSAS && typ != tokenTypeJWT {
		return 400, "The token type '" + store.Clip(typ) + "' is not supported; use " + tokenTypeSAS + "."
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
		return 401, tokenErrorText(err, tok)
	}
	path := audiencePath(audience, false)
	key, err := tok.Verify(cs.h.cfg.Keys(ctx), cs.h.cfg.Now(), cs.h.cfg.ClockSkew)
	var keyEntity string
	if errors.Is(err, sas.ErrUnknownKey) {
		keyEntity, key, err = cs.verifyEntityKey(ctx, path, tok)
	}
	if err != nil {
		return 401, tokenErrorText(err, tok)
	}
	full := audiencePath(audience, true)
	if !tok.CoversAt(cs.c.Hostname(), full) {
		return 401, "InvalidAudience: The authorization header contains a token with a wrong audience."
	}
	if entity, _ := splitSubQueue(path); entity != "" {
		if _, err := cs.h.cfg.Store.Resolve(ctx, entity); err != nil {
			if store.ErrorCode(err) == store.CodeNotFound {
				return 404, "The messaging entity '" + store.Clip(entity) + "' could not be found."
			}
			return statusOf(err), amqpError(err).Description
		}
	}
	cs.mu.Lock()
	if cs.grants == nil {
		cs.grants = map[string]grant{}
	}
	cs.grants[strings.ToLower(audience)] = grant{tok: tok, rights: key.Rights, entity: keyEntity}
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
// are its topic's), as the HTTP handlers do, and returns that entity's path with the key.
func (cs *conn) verifyEntityKey(ctx context.Context, path string, tok sas.Token) (string, sas.Key, error) {
	entity, _ := splitSubQueue(path)
	if topic, _, ok := store.SplitSubscriptionPath(entity); ok {
		entity = topic
	}
	if entity == "" {
		return "", sas.Key{}, sas.ErrUnknownKey
	}
	e, err := cs.h.cfg.Store.Resolve(ctx, entity)
	if err != nil {
		return "", sas.Key{}, sas.ErrUnknownKey
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
		return "", sas.Key{}, sas.ErrUnknownKey
	}
	key, err := tok.Verify(keys, cs.h.cfg.Now(), cs.h.cfg.ClockSkew)
	return e.Path, key, err
}

// tokenErrorText is the status description of a token error, in the service's words: the sas
// sentinels carry them; an unknown key name reads as a bad signature (the reply never tells
// whether a key of that name exists), an expired token gives its expiry as the service does, and
// a malformed token a fixed text that never echoes the token.
func tokenErrorText(err error, tok sas.Token) string {
	switch {
	case errors.Is(err, sas.ErrUnknownKey):
		return sas.ErrInvalidSignature.Error()
	case errors.Is(err, sas.ErrExpiredToken):
		return strings.TrimSuffix(sas.ErrExpiredToken.Error(), ".") + ". Expiration time: '" +
			time.Unix(tok.Expiry, 0).UTC().Format("2006-01-02 15:04:05Z") + "'"
	}
	for _, sentinel := range []error{sas.ErrMissingToken, sas.ErrUnsupportedScheme, sas.ErrInvalidSignature} {
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
