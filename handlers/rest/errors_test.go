package rest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/store"
)

func TestSendErrors(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createQueue(t, "small", "<MaxMessageSizeInKilobytes>1</MaxMessageSizeInKilobytes>")
	tests := []struct {
		name   string
		path   string
		body   string
		header map[string]string
		status int
		detail string
	}{
		{"body over 1 KB", "/small/messages", strings.Repeat("x", 1025), nil, http.StatusForbidden,
			"The message body (1025 bytes) exceeds the limit of 1024 bytes allowed on entity 'small'."},
		{"properties count toward the size", "/small/messages", strings.Repeat("x", 1000),
			map[string]string{"BrokerProperties": `{"MessageId":"` + strings.Repeat("m", 100) + `"}`}, http.StatusForbidden, "exceeds the limit of 1024 bytes"},
		{"body far over 1 KB", "/small/messages", strings.Repeat("x", 200<<10), nil, http.StatusForbidden,
			"The message body (204800 bytes) exceeds the limit of 1024 bytes allowed on entity 'small'."},
		{"malformed BrokerProperties", "/q/messages", "x", map[string]string{"BrokerProperties": `{"Label":`}, http.StatusBadRequest,
			"The BrokerProperties header is not a valid JSON object."},
		{"BrokerProperties an array", "/q/messages", "x", map[string]string{"BrokerProperties": `["Label"]`}, http.StatusBadRequest, "not a valid JSON object"},
		{"BrokerProperties with trailing text", "/q/messages", "x", map[string]string{"BrokerProperties": `{} {}`}, http.StatusBadRequest, "not a valid JSON object"},
		{"BrokerProperties with a stray brace", "/q/messages", "x", map[string]string{"BrokerProperties": `{"Label":"l"}}`}, http.StatusBadRequest, "not a valid JSON object"},
		{"BrokerProperties giving a property twice", "/q/messages", "x", map[string]string{"BrokerProperties": `{"TimeToLive":10,"TimeToLiveTimeSpan":"0.00:00:40"}`},
			http.StatusBadRequest, "BrokerProperties gives the same property more than once: 'TimeToLive' and 'TimeToLiveTimeSpan'."},
		{"Label an object", "/q/messages", "x", map[string]string{"BrokerProperties": `{"Label":{}}`}, http.StatusBadRequest, "BrokerProperties.Label must be a string."},
		{"TimeToLive zero", "/q/messages", "x", map[string]string{"BrokerProperties": `{"TimeToLive":0}`}, http.StatusBadRequest, "TimeToLive must be a positive number"},
		{"TimeToLive negative", "/q/messages", "x", map[string]string{"BrokerProperties": `{"TimeToLive":"-5"}`}, http.StatusBadRequest, "TimeToLive must be a positive number"},
		{"TimeToLiveTimeSpan malformed", "/q/messages", "x", map[string]string{"BrokerProperties": `{"TimeToLiveTimeSpan":"1:99:00"}`}, http.StatusBadRequest, "TimeToLiveTimeSpan"},
		{"ScheduledEnqueueTimeUtc not a date", "/q/messages", "x", map[string]string{"BrokerProperties": `{"ScheduledEnqueueTimeUtc":"tomorrow"}`}, http.StatusBadRequest,
			"ScheduledEnqueueTimeUtc 'tomorrow' is not an RFC 1123 or ISO 8601 date."},
		{"SessionId differs from PartitionKey", "/q/messages", "x", map[string]string{"BrokerProperties": `{"SessionId":"a","PartitionKey":"b"}`}, http.StatusBadRequest,
			"The PartitionKey 'b' must be equal to the SessionId 'a'."},
		{"MessageId of 129 characters", "/q/messages", "x", map[string]string{"BrokerProperties": `{"MessageId":"` + strings.Repeat("m", 129) + `"}`}, http.StatusBadRequest,
			"The MessageId is longer than 128 characters."},
		{"user property given twice", "/q/messages", "x", map[string]string{"pint": "1", "Pint": "2"}, http.StatusBadRequest,
			"The user property header 'Pint' is given 2 times."},
		{"missing queue", "/nope/messages", "x", nil, http.StatusNotFound, "The messaging entity 'nope' could not be found."},
		{"missing multi-segment queue", "/q/nope/messages", "x", nil, http.StatusNotFound, "The messaging entity 'q/nope' could not be found."},
	}
	for _, tc := range tests {
		r := b.do(t, call{method: http.MethodPost, path: tc.path, body: tc.body, header: tc.header, key: "sender"})
		e := r.wantError(t, tc.name, tc.status, tc.detail)
		if tc.status == http.StatusNotFound && !strings.Contains(e.Detail, "SystemTracker:sbgate:"+strings.TrimSuffix(strings.TrimPrefix(tc.path, "/"), "/messages")+",") {
			t.Errorf("%s: Detail = %q; want the entity in SystemTracker", tc.name, e.Detail)
		}
	}
	for _, q := range []string{"q", "small"} {
		if c := b.counts(t, q); c.Total() != 0 || c.SizeInBytes != 0 {
			t.Errorf("counts of %s after refused sends = %+v; want none", q, c)
		}
	}
	// Exactly at the limit is fine: 1024 bytes of body and message id together.
	b.send(t, "small", strings.Repeat("x", 1022), map[string]string{"BrokerProperties": `{"MessageId":"id"}`})
}

func TestReceiveErrors(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	b.createQueue(t, "session-queue", "<RequiresSession>true</RequiresSession>")
	b.createQueue(t, "off", "<Status>ReceiveDisabled</Status>")
	tests := []struct {
		name, method, path string
		status             int
		detail             string
	}{
		{"lock token not a GUID", http.MethodDelete, "/q/messages/1/not-a-guid", http.StatusBadRequest, "lockToken"},
		{"lock token not a GUID, unlock", http.MethodPut, "/q/messages/1/1234", http.StatusBadRequest, "lockToken"},
		{"lock token not a GUID, renew", http.MethodPost, "/q/messages/1/zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", http.StatusBadRequest, "lockToken"},
		{"timeout not a number", http.MethodPost, "/q/messages/head?timeout=soon", http.StatusBadRequest, "timeout"},
		{"negative timeout", http.MethodDelete, "/q/messages/head?timeout=-1", http.StatusBadRequest, "timeout"},
		{"missing queue", http.MethodPost, "/nope/messages/head?timeout=0", http.StatusNotFound, "could not be found"},
		{"settle on a missing queue", http.MethodDelete, "/nope/messages/1/00000000-0000-0000-0000-000000000000", http.StatusNotFound, "could not be found"},
		{"session queue", http.MethodPost, "/session-queue/messages/head?timeout=0", http.StatusBadRequest, "requires sessions"},
		{"receive disabled", http.MethodDelete, "/off/messages/head?timeout=0", http.StatusForbidden, "SubCode=40301"},
		{"GET on messages", http.MethodGet, "/q/messages", http.StatusNotFound, "No service is hosted at the specified address."},
		{"PATCH on head", http.MethodPatch, "/q/messages/head", http.StatusNotFound, "No service is hosted"},
		{"GET on a lock", http.MethodGet, "/q/messages/1/00000000-0000-0000-0000-000000000000", http.StatusNotFound, "No service is hosted"},
		{"root", http.MethodGet, "/", http.StatusNotFound, "No service is hosted"},
	}
	for _, tc := range tests {
		b.do(t, call{method: tc.method, path: tc.path}).wantError(t, tc.name+": "+tc.method+" "+tc.path, tc.status, tc.detail)
	}
	// Sending to a session queue without a SessionId is refused, with one it is stored.
	b.do(t, call{method: http.MethodPost, path: "/session-queue/messages", body: "x"}).wantError(t, "send without SessionId", http.StatusBadRequest, "SessionId was not set")
	b.send(t, "session-queue", "x", map[string]string{"BrokerProperties": `{"SessionId":"s"}`})
	b.send(t, "off", "x", nil)
}

// TestDatabaseUnreachable runs the handlers over a store whose database refuses connections.
func TestDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), "postgres://x@127.0.0.1:1/x?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := &bundle{clock: newClock()}
	b.now = b.clock.Now
	b.serve(t, store.New(pool, store.Options{Now: b.now}))

	tests := []struct {
		name string
		call call
	}{
		{"send", call{method: http.MethodPost, path: "/q/messages", body: "x", key: "sender"}},
		{"peek-lock", call{method: http.MethodPost, path: "/q/messages/head?timeout=0"}},
		{"complete", call{method: http.MethodDelete, path: "/q/messages/1/00000000-0000-0000-0000-000000000000"}},
		{"get", call{method: http.MethodGet, path: "/q"}},
		{"create", call{method: http.MethodPut, path: "/q"}},
		{"list", call{method: http.MethodGet, path: "/$Resources/Queues"}},
		{"readyz", call{method: http.MethodGet, path: "/readyz", key: "-"}},
	}
	for _, tc := range tests {
		r := b.do(t, tc.call)
		r.wantError(t, tc.name+" with the database down", http.StatusServiceUnavailable, "")
		if got := r.header.Get("Retry-After"); got != "2" {
			t.Errorf("%s with the database down: Retry-After = %q; want %q", tc.name, got, "2")
		}
		if strings.Contains(r.body, "127.0.0.1:1") || strings.Contains(r.body, "dial") {
			t.Errorf("%s with the database down: body %q shows connection details", tc.name, r.body)
		}
	}
	b.do(t, call{method: http.MethodGet, path: "/healthz", key: "-"}).want(t, "healthz with the database down", http.StatusOK)
}

// failingStore returns errors that must never reach a client as they are.
type failingStore struct {
	broker.Store
}

func (failingStore) Send(context.Context, *broker.Entity, []broker.Message) error {
	return errors.New("secret internal detail")
}

func (failingStore) Receive(context.Context, broker.ReceiveRequest) ([]*broker.Message, error) {
	panic("secret panic detail")
}

func (failingStore) Settle(_ context.Context, _ broker.Target, reqs []broker.SettleRequest) []broker.SettleResult {
	res := make([]broker.SettleResult, len(reqs))
	for i := range res {
		res[i].Err = &broker.Error{Code: broker.CodeInternal, Message: "secret message of an internal error"}
	}
	return res
}

func TestInternalErrorsHideDetails(t *testing.T) {
	b := setup(t, setupOptions{wrap: func(s broker.Store) broker.Store { return failingStore{s} }})
	b.createQueue(t, "q", "")
	for _, c := range []call{
		{method: http.MethodPost, path: "/q/messages", body: "x"},
		{method: http.MethodPost, path: "/q/messages/head?timeout=0"},
		{method: http.MethodDelete, path: "/q/messages/1/00000000-0000-0000-0000-000000000000"},
	} {
		r := b.do(t, c)
		r.wantError(t, c.method+" "+c.path, http.StatusInternalServerError,
			"The server was unable to process the request; please retry the operation.")
		if strings.Contains(r.body, "secret") {
			t.Errorf("%s %s: body %q shows the internal error", c.method, c.path, r.body)
		}
	}
	// The server still serves after a panic.
	b.do(t, call{method: http.MethodGet, path: "/q"}).want(t, "GET /q after the failures", http.StatusOK)
}
