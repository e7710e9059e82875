package amqp

import (
	"context"
	"strings"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
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
	_ = r.cs.request(l, d, "The put-token request", func(ctx context.Context, m *amqp.Message) *amqp.Message {
		status, desc := r.cs.putToken(ctx, m)
		return cbsReply(status, desc)
	}, func(err error) *amqp.Message {
		return cbsReply(500, "The reply could not be encoded: "+broker.Clip(err.Error()))
	})
}

func cbsReply(status int32, desc string) *amqp.Message {
	return &amqp.Message{ApplicationProperties: amqp.Map{
		{Key: "status-code", Value: status},
		{Key: "status-description", Value: desc},
	}}
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
		return 400, "The $cbs operation '" + broker.Clip(op) + "' is not supported; use put-token."
	}
	if typ := str("type"); typ != tokenTypeSAS && typ != tokenTypeJWT {
		return 400, "The token type '" + broker.Clip(typ) + "' is not supported; use " + tokenTypeSAS + "."
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
	path := audiencePath(audience, false)
	g, err := cs.h.access.Verify(ctx, text, path)
	if err != nil {
		return 401, err.Error()
	}
	if !g.Covers(cs.c.Hostname(), audiencePath(audience, true)) {
		return 401, access.AudienceText
	}
	if entity, _ := access.SplitSubQueue(path); entity != "" {
		if _, err := cs.h.cfg.Store.Resolve(ctx, entity); err != nil {
			if broker.ErrorCode(err) == broker.CodeNotFound {
				return 404, "The messaging entity '" + broker.Clip(entity) + "' could not be found."
			}
			return statusOf(err), amqpError(err).Description
		}
	}
	cs.mu.Lock()
	if cs.grants == nil {
		cs.grants = map[string]access.Grant{}
	}
	cs.grants[strings.ToLower(audience)] = g
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
