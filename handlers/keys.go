package handlers

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sbgate/sbgate/sas"
)

// keyCache holds the namespace keys last read from the database.
type keyCache struct {
	mu   sync.Mutex
	keys []sas.Key // the configured keys, then the database's
	read time.Time
	ok   bool // keys holds a successful read
}

// namespaceKeys returns the keys a token may be signed with at namespace level: the configured
// ones and, with Config.StoreKeys, the database's as read at most KeyRefresh ago. When the
// database cannot be read the last keys read stay in force (the configured ones alone before any
// read succeeded): a database outage neither locks everybody out nor revives a revoked key.
func (s *Server) namespaceKeys(ctx context.Context) []sas.Key {
	if !s.cfg.StoreKeys {
		return s.cfg.Keys
	}
	c := &s.keys
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.now()
	if c.ok && now.Sub(c.read) < s.cfg.KeyRefresh && !now.Before(c.read) {
		return c.keys
	}
	stored, err := s.store.NamespaceKeys(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "read namespace keys", slog.Any("err", err))
		if c.ok {
			return c.keys
		}
		return s.cfg.Keys
	}
	keys := append(make([]sas.Key, 0, len(s.cfg.Keys)+len(stored)), s.cfg.Keys...)
	for _, k := range stored {
		rights, err := sas.ParseRights(k.Rights)
		if err != nil {
			s.log.WarnContext(ctx, "namespace key with invalid rights ignored", slog.String("key", k.Name), slog.Any("err", err))
			continue
		}
		keys = append(keys, sas.Key{Name: k.Name, Primary: k.PrimaryKey, Secondary: k.SecondaryKey, Rights: rights})
	}
	c.keys, c.read, c.ok = keys, now, true
	return keys
}
