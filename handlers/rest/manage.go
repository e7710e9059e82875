package rest

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/sbgate/sbgate/api"
	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
)

// maxDescriptionBytes bounds a management request body.
const maxDescriptionBytes = 1 << 20

// PutEntity creates an entity, or with If-Match replaces its description.
func (s *Server) PutEntity(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.PutEntityParams) {
	body, err := readDescription(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	kind, err := atom.DescriptionKind(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if kind == broker.KindSubscription {
		s.writeError(w, r, broker.BadRequest("A subscription is put at {topic}/Subscriptions/{name}, not at '%s'.", broker.Clip(entityPath)))
		return
	}
	props, err := atom.DecodeProperties(body, kind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkSupplementary(r, props); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.saveEntity(w, r, params.IfMatch, kind, entityPath, props, func() (*broker.Entity, error) {
		return s.store.CreateEntity(r.Context(), kind, entityPath, props)
	})
}

// saveEntity answers a management PUT: with If-Match it replaces the description of the entity at
// path (200), without it it runs create (201).
func (s *Server) saveEntity(w http.ResponseWriter, r *http.Request, ifMatch *string, kind broker.Kind, path string, props broker.Properties, create func() (*broker.Entity, error)) {
	var e *broker.Entity
	var err error
	if ifMatch != nil {
		e, err = s.store.UpdateEntity(r.Context(), kind, path, props)
	} else {
		e, err = create()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeEntry(w, r, putStatus(ifMatch), e, false)
}

// putStatus is the status of a successful PUT: 200 when If-Match made it an update, 201 when it
// created.
func putStatus(ifMatch *string) int {
	if ifMatch != nil {
		return http.StatusOK
	}
	return http.StatusCreated
}

// GetEntity returns an entity's description with its counts. A path that holds no queue or topic
// gets the "Publicly Listed Services" feed, as the service answers.
func (s *Server) GetEntity(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.GetEntityParams) {
	e, err := s.store.GetEntity(r.Context(), entityPath)
	if errors.Is(err, broker.ErrNotFound) {
		w.Header().Set("Content-Type", atom.FeedContentType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(atom.AppendNotFoundFeed(nil, s.now()))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeEntry(w, r, http.StatusOK, e, true)
}

// DeleteEntity deletes an entity with everything in it.
func (s *Server) DeleteEntity(w http.ResponseWriter, r *http.Request, entityPath api.EntityPath, params api.DeleteEntityParams) {
	if err := s.store.DeleteEntity(r.Context(), entityPath); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// ListQueues returns a page of queues.
func (s *Server) ListQueues(w http.ResponseWriter, r *http.Request, params api.ListQueuesParams) {
	s.listEntities(w, r, broker.KindQueue, "", "Queues", params.Skip, params.Top)
}

// maxPageSize bounds $top.
const maxPageSize = 1000

func (s *Server) listEntities(w http.ResponseWriter, r *http.Request, kind broker.Kind, parent, title string, skipP, topP *int) {
	skip, top, err := page(skipP, topP)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.store.ListEntities(r.Context(), kind, parent, skip, top)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	self := requestURL(r)
	entries := make([][]byte, 0, len(list))
	for _, e := range list {
		entries = append(entries, atom.AppendEntry(nil, s.entryInfo(r, e, self), e, s.encodeOptions(r, e, true)))
	}
	s.writeFeed(w, r, title, skip, top, len(list), entries)
}

// GetNamespaceInfo describes the namespace.
func (s *Server) GetNamespaceInfo(w http.ResponseWriter, r *http.Request, params api.GetNamespaceInfoParams) {
	w.Header().Set("Content-Type", atom.EntryContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(atom.AppendNamespaceInfo(nil, requestURL(r), s.cfg.Namespace, s.cfg.Started))
}

func (s *Server) writeEntry(w http.ResponseWriter, r *http.Request, status int, e *broker.Entity, runtime bool) {
	w.Header().Set("Content-Type", atom.EntryContentType)
	w.WriteHeader(status)
	_, _ = w.Write(atom.AppendEntry(nil, s.entryInfo(r, e, ""), e, s.encodeOptions(r, e, runtime)))
}

// entryInfo builds an entity's Atom envelope. A lone entry's id is the request URL as received
// (clients take names from it, so its casing must be the request's); in a feed each entry gets
// its own URL and the feed's as xml:base.
func (s *Server) entryInfo(r *http.Request, e *broker.Entity, feedBase string) atom.EntryInfo {
	id := requestURL(r)
	if feedBase != "" {
		id = requestScheme(r) + "://" + r.Host + "/" + escapePath(e.Path) + apiVersionQuery(r)
	}
	info := atom.EntryInfo{ID: id, Title: e.Name, Published: e.CreatedAt, Updated: e.UpdatedAt, SelfHref: id, XMLBase: feedBase}
	if e.Kind != broker.KindSubscription {
		info.Author = s.cfg.Namespace
	}
	return info
}

func (s *Server) encodeOptions(r *http.Request, e *broker.Entity, runtime bool) atom.EncodeOptions {
	return atom.EncodeOptions{Runtime: runtime, Host: r.Host, SubscriptionCount: int(e.SubscriptionCount),
		FilterCounts: apiVersionAtLeast(r, "2024-05"), SQLFilterCount: e.SQLFilterCount, CorrelationFilterCount: e.CorrelationFilterCount}
}

// apiVersionAtLeast reports whether the request's api-version is min or later. Versions are dates
// (2017-04, 2021-05, 2024-05), so they compare as text.
func apiVersionAtLeast(r *http.Request, min string) bool {
	v := r.URL.Query().Get("api-version")
	return v != "" && v >= min
}

// requestURL is the absolute URL of the request as the client sent it.
func requestURL(r *http.Request) string {
	return requestScheme(r) + "://" + r.Host + r.RequestURI
}

// withQuery is the request URL with one query parameter set.
func withQuery(r *http.Request, key, value string) string {
	path, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		q = url.Values{}
	}
	q.Set(key, value)
	return requestScheme(r) + "://" + r.Host + path + "?" + q.Encode()
}

func apiVersionQuery(r *http.Request) string {
	if v := r.URL.Query().Get("api-version"); v != "" {
		return "?api-version=" + url.QueryEscape(v)
	}
	return ""
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
