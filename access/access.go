// Package access decides who may do what, for both of sbgate's doors: the REST handlers and the
// AMQP listener call it and neither has rules of its own. It holds the namespace keys (the
// configured ones and the database's, read again at most every Refresh), verifies shared access
// signatures (a namespace key, or a key of the entity addressed), compares secrets in constant
// time, says whether a proven grant covers an entity with a right, and words every refusal the
// way the service does without ever telling whether a key name exists.
package access

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// Source is where keys are kept: the namespace keys of the database and each entity's own.
type Source interface {
	NamespaceKeys(ctx context.Context) ([]broker.NamespaceKey, error)
	Resolve(ctx context.Context, path string) (*broker.Entity, error)
}

// Config configures a Layer.
type Config struct {
	// Keys are the namespace keys given in the configuration; they win over a stored key of the
	// same name.
	Keys []sas.Key
	// Source, when set, adds the keys kept in the database (namespace keys, read at most
	// Refresh apart) and lets entities' own keys sign tokens for them.
	Source Source
	// StoredKeys says whether the database's namespace keys count (sbgate key create/rotate/
	// revoke); entity keys come from Source either way.
	StoredKeys bool
	// Refresh bounds how long a key read from the database is trusted: a new, rotated or revoked
	// key is seen within it (default 5 s).
	Refresh time.Duration
	// Now is the clock of expiry checks and of the key cache (default time.Now).
	Now func() time.Time
	// ClockSkew is how long past its expiry a token is still accepted (default 5 minutes).
	ClockSkew time.Duration
	// Logger receives warnings about keys that cannot be read.
	Logger *slog.Logger
}

// Layer is the access layer. Its methods are safe for concurrent use.
type Layer struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	keys []sas.Key // the configured keys, then the database's
	read time.Time
	ok   bool // keys holds a successful read

	// proven remembers the tokens Verify accepted, by their text: a client sends the same token
	// with every request until it renews it, and checking its signature again (an HMAC, and
	// parsing it) was most of what authorizing a request cost. A remembered grant is used only
	// while it has not expired and its key stands as it did (stands).
	provenMu sync.Mutex
	proven   map[string]provenToken
}

// provenToken is a token Verify accepted: its grant and, for a grant of an entity's own key,
// the entity guarding the path it was verified for (AuthEntity), the only one it proves anything
// for.
type provenToken struct {
	grant      Grant
	authEntity string
}

// maxProven bounds the tokens remembered; when full, they are all forgotten at once.
const maxProven = 4096

// New returns a Layer for cfg.
func New(cfg Config) *Layer {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Layer{cfg: cfg, log: cfg.Logger}
}

// Now is the layer's clock.
func (l *Layer) Now() time.Time { return l.cfg.Now() }

// Refresh is how long a key read from the database is trusted; a holder of a Grant checks it
// again (Valid) at least this often to see revocations.
func (l *Layer) Refresh() time.Duration { return l.cfg.Refresh }

// NamespaceKeys returns the keys a token may be signed with at namespace level: the configured
// ones and, with StoredKeys, the database's as read at most Refresh ago. When the database cannot
// be read the last keys read stay in force (the configured ones alone before any read
// succeeded): an outage neither locks everybody out nor revives a revoked key.
func (l *Layer) NamespaceKeys(ctx context.Context) []sas.Key {
	if !l.cfg.StoredKeys || l.cfg.Source == nil {
		return l.cfg.Keys
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	if l.ok && now.Sub(l.read) < l.cfg.Refresh && !now.Before(l.read) {
		return l.keys
	}
	stored, err := l.cfg.Source.NamespaceKeys(ctx)
	if err != nil {
		l.log.WarnContext(ctx, "read namespace keys", slog.Any("err", err))
		if l.ok {
			return l.keys
		}
		return l.cfg.Keys
	}
	keys := append(make([]sas.Key, 0, len(l.cfg.Keys)+len(stored)), l.cfg.Keys...)
	for _, k := range stored {
		if keyNamed(l.cfg.Keys, k.Name) {
			continue // configuration wins
		}
		rights, err := sas.ParseRights(k.Rights)
		if err != nil {
			l.log.WarnContext(ctx, "namespace key with invalid rights ignored", slog.String("key", k.Name), slog.Any("err", err))
			continue
		}
		keys = append(keys, sas.Key{Name: k.Name, Primary: k.PrimaryKey, Secondary: k.SecondaryKey, Rights: rights})
	}
	l.keys, l.read, l.ok = keys, now, true
	return keys
}

func keyNamed(keys []sas.Key, name string) bool {
	for _, k := range keys {
		if k.Name == name {
			return true
		}
	}
	return false
}

// entityKeys returns the shared access keys of the queue or topic that guards path (see
// AuthEntity), and that entity's path; none when it has none or does not exist.
func (l *Layer) entityKeys(ctx context.Context, path string) (string, []sas.Key) {
	entity := AuthEntity(path)
	if entity == "" || l.cfg.Source == nil {
		return "", nil
	}
	e, err := l.cfg.Source.Resolve(ctx, entity)
	if err != nil {
		return "", nil
	}
	keys := make([]sas.Key, 0, len(e.Props.AuthorizationRules))
	for _, rule := range e.Props.AuthorizationRules {
		rights, err := sas.ParseRights(rule.Rights)
		if err != nil {
			continue
		}
		keys = append(keys, sas.Key{Name: rule.KeyName, Primary: rule.PrimaryKey, Secondary: rule.SecondaryKey, Rights: rights})
	}
	return e.Path, keys
}

// Grant is what a verified token (or a SASL PLAIN key) proves: its scope, the rights of the key
// that signed it and, for an entity's own key, that entity.
type Grant struct {
	// Token is the verified token; zero for a PLAIN grant, which is namespace-wide.
	Token sas.Token
	// Rights are the rights of the key.
	Rights sas.Rights
	// KeyName names the key; Entity is the queue or topic whose own key it is ("" for a
	// namespace key). A grant of an entity's key covers that entity (its subscriptions and
	// subqueues) only, whatever the token's scope says.
	KeyName, Entity string
	// Expiry is when the token expires (zero for PLAIN).
	Expiry time.Time
	// secret is the key text that verified it, so Valid can tell a rotated key.
	secret string
	plain  bool
}

// Namespace reports whether a namespace key (not an entity's) backs the grant.
func (g Grant) Namespace() bool { return g.Entity == "" }

// Verify checks the token text of a request that addresses path: signed by a namespace key, or
// by a key of the entity that guards path; not expired. It does not check the token's scope or rights (see Grant.Covers and
// Grant.Allows). Errors are *Error with the service's text.
func (l *Layer) Verify(ctx context.Context, text, path string) (Grant, error) {
	if g, ok := l.provenGrant(ctx, text, path); ok {
		return g, nil
	}
	g, err := l.verify(ctx, text, path)
	if err == nil {
		l.remember(text, path, g)
	}
	return g, err
}

// provenGrant is the grant of a token Verify accepted before, for a path it proved it for,
// while the token has not expired and its key stands as it did.
func (l *Layer) provenGrant(ctx context.Context, text, path string) (Grant, bool) {
	l.provenMu.Lock()
	p, ok := l.proven[text]
	l.provenMu.Unlock()
	if !ok || l.Expired(p.grant) || (p.grant.Entity != "" && !strings.EqualFold(AuthEntity(path), p.authEntity)) {
		return Grant{}, false
	}
	return p.grant, l.stands(ctx, p.grant)
}

// stands reports whether the key behind g is as it was when g was proven: its secret, and
// exactly its rights (Valid lets a key gain rights; a grant proven again would carry them).
func (l *Layer) stands(ctx context.Context, g Grant) bool {
	k, ok := l.keyBehind(ctx, g)
	return ok && k.Rights == g.Rights
}

// keyBehind is the key g was proven with as it is now (the namespace's or g.Entity's key of
// g's key name, read at most Refresh ago), and whether it still has the secret, primary or
// secondary, that proved g: false when the key is gone or rotated.
func (l *Layer) keyBehind(ctx context.Context, g Grant) (sas.Key, bool) {
	var keys []sas.Key
	if g.Entity == "" {
		keys = l.NamespaceKeys(ctx)
	} else {
		_, keys = l.entityKeys(ctx, g.Entity)
	}
	for _, k := range keys {
		if k.Name == g.KeyName {
			same := subtle.ConstantTimeCompare([]byte(k.Primary), []byte(g.secret)) == 1 ||
				(k.Secondary != "" && subtle.ConstantTimeCompare([]byte(k.Secondary), []byte(g.secret)) == 1)
			return k, same
		}
	}
	return sas.Key{}, false
}

func (l *Layer) remember(text, path string, g Grant) {
	p := provenToken{grant: g}
	if g.Entity != "" {
		p.authEntity = AuthEntity(path)
	}
	l.provenMu.Lock()
	defer l.provenMu.Unlock()
	if l.proven == nil || len(l.proven) >= maxProven {
		l.proven = make(map[string]provenToken)
	}
	l.proven[text] = p
}

// verify is Verify without the tokens proven before.
func (l *Layer) verify(ctx context.Context, text, path string) (Grant, error) {
	tok, err := sas.ParseToken(text)
	if err != nil {
		return Grant{}, tokenError(err, tok)
	}
	now := l.cfg.Now()
	key, err := tok.Verify(l.NamespaceKeys(ctx), now, l.cfg.ClockSkew)
	var entity string
	if errors.Is(err, sas.ErrUnknownKey) {
		var keys []sas.Key
		if entity, keys = l.entityKeys(ctx, path); len(keys) > 0 {
			key, err = tok.Verify(keys, now, l.cfg.ClockSkew)
		}
	}
	if err != nil {
		return Grant{}, tokenError(err, tok)
	}
	return Grant{Token: tok, Rights: key.Rights, KeyName: key.Name, Entity: entity,
		Expiry: time.Unix(min(max(tok.Expiry, 0), 253402300799), 0), secret: matchedSecret(key, tok)}, nil
}

// matchedSecret is the key text (primary or secondary) that signed tok.
func matchedSecret(k sas.Key, tok sas.Token) string {
	if k.Secondary != "" {
		if _, err := tok.Verify([]sas.Key{{Name: k.Name, Primary: k.Secondary}}, time.Time{}, 0); err == nil {
			return k.Secondary
		}
	}
	return k.Primary
}

// VerifyPlain checks a key name and key given in SASL PLAIN: a namespace key's primary or
// secondary, compared in constant time. The grant is namespace-wide with the key's rights.
func (l *Layer) VerifyPlain(ctx context.Context, name, secret string) (Grant, error) {
	var found *sas.Key
	for _, k := range l.NamespaceKeys(ctx) {
		if k.Name == name {
			found = &k
			break
		}
	}
	// Compared whether or not the name exists, so the time does not tell.
	var primary, secondary string
	if found != nil {
		primary, secondary = found.Primary, found.Secondary
	}
	okP := primary != "" && subtle.ConstantTimeCompare([]byte(primary), []byte(secret)) == 1
	okS := secondary != "" && subtle.ConstantTimeCompare([]byte(secondary), []byte(secret)) == 1
	if found == nil || !(okP || okS) {
		return Grant{}, &Error{Text: sas.ErrInvalidSignature.Error()}
	}
	return Grant{Rights: found.Rights, KeyName: name, secret: secret, plain: true}, nil
}

// Valid reports whether the key behind g still stands as it did when g was proven: not revoked,
// not rotated, not stripped of rights (checked against the keys as read at most Refresh ago).
// Open AMQP links ask it at least every Refresh.
func (l *Layer) Valid(ctx context.Context, g Grant) bool {
	k, ok := l.keyBehind(ctx, g)
	return ok && k.Rights.Has(g.Rights)
}

// Expired reports whether g's token has expired at now (never for PLAIN).
func (l *Layer) Expired(g Grant) bool {
	return !g.plain && l.cfg.Now().After(g.Expiry.Add(l.cfg.ClockSkew))
}

// Covers reports whether the grant covers path addressed at host: the token's scope covers it
// (sas.Token.CoversAt), and a grant of an entity's key stays on that entity.
func (g Grant) Covers(host, path string) bool {
	if !g.plain && !g.Token.CoversAt(host, path) {
		return false
	}
	return g.Entity == "" || within(path, g.Entity)
}

// within reports whether path is entity or below it, segment by segment, case-insensitively.
func within(path, entity string) bool {
	want := strings.Split(strings.Trim(entity, "/"), "/")
	have := strings.Split(strings.Trim(path, "/"), "/")
	if len(have) < len(want) {
		return false
	}
	for i := range want {
		if !strings.EqualFold(want[i], have[i]) {
			return false
		}
	}
	return true
}

// Error is an authorization refusal: Text is the service's wording, safe to show the client (it
// never tells whether a key name exists).
type Error struct{ Text string }

func (e *Error) Error() string { return e.Text }

// tokenError is the refusal of a token that does not verify: the sas sentinels carry the
// service's texts; an unknown key name reads as a bad signature; an expired token gives its expiry
// as the service does; a malformed one a fixed text that never echoes the token.
func tokenError(err error, tok sas.Token) *Error {
	switch {
	case errors.Is(err, sas.ErrUnknownKey):
		return &Error{Text: sas.ErrInvalidSignature.Error()}
	case errors.Is(err, sas.ErrExpiredToken):
		return &Error{Text: ExpiredText(time.Unix(tok.Expiry, 0))}
	}
	return &Error{Text: err.Error()}
}

// ExpiredText is the service's refusal of a token that expired at t.
func ExpiredText(t time.Time) string {
	return strings.TrimSuffix(sas.ErrExpiredToken.Error(), ".") + ". Expiration time: '" +
		t.UTC().Format("2006-01-02 15:04:05Z") + "'"
}

// AudienceText is the refusal of a token whose scope does not cover what it is used for.
const AudienceText = "InvalidAudience: The authorization header contains a token with a wrong audience."

// MissingRightText is the refusal of a grant without the right need on resource.
func MissingRightText(need sas.Rights, resource string) string {
	return fmt.Sprintf("Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: '%s'.",
		need.ClaimText(), broker.Clip(resource))
}

// Allows checks that g covers path (addressed at host) with the right need, and returns the
// refusal otherwise. resource is how the refusal names what was asked for.
func (l *Layer) Allows(g Grant, host, path string, need sas.Rights, resource string) error {
	if l.Expired(g) {
		return &Error{Text: ExpiredText(g.Expiry)}
	}
	if !g.Covers(host, path) {
		return &Error{Text: AudienceText}
	}
	if !g.Rights.Has(need) {
		return &Error{Text: MissingRightText(need, resource)}
	}
	return nil
}

// SplitSubQueue splits "x/$DeadLetterQueue" (any casing) into "x" and the dead-letter subqueue.
func SplitSubQueue(path string) (string, broker.SubQueue) {
	const suffix = "/$deadletterqueue"
	if len(path) > len(suffix) && strings.EqualFold(path[len(path)-len(suffix):], suffix) {
		return path[:len(path)-len(suffix)], broker.SubQueueDeadLetter
	}
	return path, broker.SubQueueMain
}

// AuthEntity is the queue or topic whose keys guard an entity path: the path without a
// dead-letter suffix, a "/$management" node or a subscription part.
func AuthEntity(path string) string {
	path = strings.Trim(path, "/")
	if i := strings.LastIndex(strings.ToLower(path), "/$management"); i >= 0 && i == len(path)-len("/$management") {
		path = path[:i]
	}
	path, _ = SplitSubQueue(path)
	if topic, _, ok := broker.SplitSubscriptionPath(path); ok {
		return topic
	}
	return path
}

// ValidPath reports whether path can name an entity at all: a queue or topic path, or a
// subscription of one, with or without its dead-letter subqueue. A grant can cover nothing else,
// so a node (such as "<path>/$management") on another path is refused before it is attached.
func ValidPath(path string) bool {
	path, _ = SplitSubQueue(path)
	if topic, sub, ok := broker.SplitSubscriptionPath(path); ok {
		return broker.ValidateEntityPath(topic) == nil && broker.ValidateSubscriptionName(sub) == nil
	}
	return broker.ValidateEntityPath(path) == nil
}
