package rest

import (
	"io"
	"net/http"
	"strconv"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
)

// ListTopics returns a page of topics.
func (s *Server) ListTopics(w http.ResponseWriter, r *http.Request, params api.ListTopicsParams) {
	s.listEntities(w, r, broker.KindTopic, "", "Topics", params.Skip, params.Top)
}

// ListSubscriptions returns a page of a topic's subscriptions.
func (s *Server) ListSubscriptions(w http.ResponseWriter, r *http.Request, topic api.EntityPath, params api.ListSubscriptionsParams) {
	s.listEntities(w, r, broker.KindSubscription, topic, "Subscriptions", params.Skip, params.Top)
}

// readDescription reads a management request body within its limit.
func readDescription(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDescriptionBytes))
	if err != nil {
		return nil, broker.BadRequest("The entity description is larger than %d bytes or could not be read.", maxDescriptionBytes)
	}
	return body, nil
}

// PutSubscription creates a subscription, or with If-Match replaces its description.
func (s *Server) PutSubscription(w http.ResponseWriter, r *http.Request, topic api.EntityPath, name api.SubscriptionName, params api.PutSubscriptionParams) {
	body, err := readDescription(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	props, rule, err := atom.DecodeSubscription(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkSupplementary(r, props); err != nil {
		s.writeError(w, r, err)
		return
	}
	path := broker.SubscriptionPath(topic, name)
	s.saveEntity(w, r, params.IfMatch, broker.KindSubscription, path, props, func() (*broker.Entity, error) {
		return s.store.CreateSubscription(r.Context(), path, props, rule)
	})
}

// subscription reads the subscription name of topic; a missing one is 404, not the empty feed.
func (s *Server) subscription(r *http.Request, topic, name string) (*broker.Entity, error) {
	e, err := s.store.GetEntity(r.Context(), broker.SubscriptionPath(topic, name))
	if err == nil && e.Kind != broker.KindSubscription {
		err = &broker.Error{Code: broker.CodeNotFound, Message: "The messaging entity is not a subscription."}
	}
	return e, err
}

// GetSubscription returns a subscription's description with its counts.
func (s *Server) GetSubscription(w http.ResponseWriter, r *http.Request, topic api.EntityPath, name api.SubscriptionName, params api.GetSubscriptionParams) {
	e, err := s.subscription(r, topic, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeEntry(w, r, http.StatusOK, e, true)
}

// DeleteSubscription deletes a subscription with its rules and messages.
func (s *Server) DeleteSubscription(w http.ResponseWriter, r *http.Request, topic api.EntityPath, name api.SubscriptionName, params api.DeleteSubscriptionParams) {
	if _, err := s.subscription(r, topic, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.store.DeleteEntity(r.Context(), broker.SubscriptionPath(topic, name)); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// PutRuleNamedInBody creates a rule named by its body's <Name>, as the Go SDK sends one it was
// given no name for.
func (s *Server) PutRuleNamedInBody(w http.ResponseWriter, r *http.Request, topic api.EntityPath, sub api.SubscriptionName, params api.PutRuleNamedInBodyParams) {
	s.putRule(w, r, topic, sub, "", nil)
}

// PutRule creates a rule, or with If-Match replaces it.
func (s *Server) PutRule(w http.ResponseWriter, r *http.Request, topic api.EntityPath, sub api.SubscriptionName, name api.RuleName, params api.PutRuleParams) {
	s.putRule(w, r, topic, sub, name, params.IfMatch)
}

func (s *Server) putRule(w http.ResponseWriter, r *http.Request, topic, sub, name string, ifMatch *string) {
	body, err := readDescription(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rule, err := atom.DecodeRule(body, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	saved, err := s.store.PutRule(r.Context(), broker.SubscriptionPath(topic, sub), rule, ifMatch != nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeRule(w, r, putStatus(ifMatch), saved)
}

// GetRule returns a rule.
func (s *Server) GetRule(w http.ResponseWriter, r *http.Request, topic api.EntityPath, sub api.SubscriptionName, name api.RuleName, params api.GetRuleParams) {
	rule, err := s.store.GetRule(r.Context(), broker.SubscriptionPath(topic, sub), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeRule(w, r, http.StatusOK, rule)
}

// DeleteRule deletes a rule.
func (s *Server) DeleteRule(w http.ResponseWriter, r *http.Request, topic api.EntityPath, sub api.SubscriptionName, name api.RuleName, params api.DeleteRuleParams) {
	if err := s.store.DeleteRule(r.Context(), broker.SubscriptionPath(topic, sub), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// ListRules returns a page of a subscription's rules.
func (s *Server) ListRules(w http.ResponseWriter, r *http.Request, topic api.EntityPath, sub api.SubscriptionName, params api.ListRulesParams) {
	skip, top, err := page(params.Skip, params.Top)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	subPath := broker.SubscriptionPath(topic, sub)
	rules, err := s.store.ListRules(r.Context(), subPath, skip, top)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	self := requestURL(r)
	entries := make([][]byte, 0, len(rules))
	for _, rule := range rules {
		id := requestScheme(r) + "://" + r.Host + "/" + escapePath(subPath) + "/Rules/" + escapePath(rule.Name) + apiVersionQuery(r)
		info := atom.EntryInfo{ID: id, Title: rule.Name, Published: rule.CreatedAt, Updated: rule.CreatedAt, SelfHref: id, XMLBase: self}
		entries = append(entries, atom.AppendRuleEntry(nil, info, rule))
	}
	s.writeFeed(w, r, "Rules", skip, top, len(rules), entries)
}

func (s *Server) writeRule(w http.ResponseWriter, r *http.Request, status int, rule *broker.Rule) {
	id := requestURL(r)
	info := atom.EntryInfo{ID: id, Title: rule.Name, Published: rule.CreatedAt, Updated: rule.CreatedAt, SelfHref: id}
	w.Header().Set("Content-Type", atom.EntryContentType)
	w.WriteHeader(status)
	_, _ = w.Write(atom.AppendRuleEntry(nil, info, rule))
}

// writeFeed answers with a feed of pre-encoded entries; a full page links the next one, as the
// service does (JS pages only by that link).
func (s *Server) writeFeed(w http.ResponseWriter, r *http.Request, title string, skip, top, n int, entries [][]byte) {
	self := requestURL(r)
	info := atom.FeedInfo{Title: title, ID: self, SelfHref: self, Updated: s.now()}
	if n == top {
		info.NextHref = withQuery(r, "$skip", strconv.Itoa(skip+top))
	}
	w.Header().Set("Content-Type", atom.FeedContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(atom.AppendFeed(nil, info, entries))
}

// page reads $skip and $top.
func page(skipP, topP *int) (int, int, error) {
	skip, top := 0, 100
	if skipP != nil {
		skip = *skipP
	}
	if topP != nil {
		top = *topP
	}
	if skip < 0 || top < 1 {
		return 0, 0, broker.BadRequest("$skip must be 0 or more and $top 1 or more.")
	}
	return skip, min(top, maxPageSize), nil
}
