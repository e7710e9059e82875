package rest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/sas"
)

// TestStoredNamespaceKeys: keys created, rotated and revoked in the database are honoured, with
// their rights, by a running server within KeyRefresh, without a restart.
func TestStoredNamespaceKeys(t *testing.T) {
	b := setup(t)
	b.createQueue(t, "q", "")
	srv := httptest.NewServer(rest.NewServer(b.store, rest.Config{
		Keys: testKeys, Now: b.now, StoreKeys: true, KeyRefresh: 5 * time.Second,
	}))
	t.Cleanup(srv.Close)
	do := func(method, path, keyName, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader("m"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", sas.Sign(srv.URL+path, keyName, key, b.now().Add(time.Hour)))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	want := func(what string, status int, gotStatus int, body string) {
		t.Helper()
		if gotStatus != status {
			t.Errorf("%s: status %d; want %d\n%s", what, gotStatus, status, body)
		}
	}
	send := func(keyName, key string) (int, string) { return do(http.MethodPost, "/q/messages", keyName, key) }

	st, body := send("app", "nothing yet")
	want("unknown key", http.StatusUnauthorized, st, body)
	app, err := b.store.CreateNamespaceKey(t.Context(), "app", []string{"Send"})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Second)
	st, body = send("app", app.PrimaryKey)
	want("send with a new Send key", http.StatusCreated, st, body)
	st, body = send("app", app.SecondaryKey)
	want("send with its secondary key", http.StatusCreated, st, body)
	st, body = do(http.MethodDelete, "/q/messages/head?timeout=0", "app", app.PrimaryKey)
	want("receive with a Send key", http.StatusUnauthorized, st, body)
	st, body = do(http.MethodGet, "/q", "app", app.PrimaryKey)
	want("read the queue with a Send key", http.StatusUnauthorized, st, body)
	st, body = do(http.MethodDelete, "/q", "app", app.PrimaryKey)
	want("delete the queue with a Send key", http.StatusUnauthorized, st, body)

	rotated, err := b.store.RotateNamespaceKey(t.Context(), "app", false)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Second)
	st, body = send("app", app.PrimaryKey)
	want("send with the rotated-out primary", http.StatusUnauthorized, st, body)
	st, body = send("app", rotated.PrimaryKey)
	want("send with the new primary", http.StatusCreated, st, body)
	st, body = send("app", app.SecondaryKey)
	want("send with the kept secondary", http.StatusCreated, st, body)

	if err := b.store.DeleteNamespaceKey(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	st, body = send("app", rotated.PrimaryKey)
	want("within KeyRefresh of the revocation", http.StatusCreated, st, body)
	b.clock.Advance(5 * time.Second)
	st, body = send("app", rotated.PrimaryKey)
	want("send with a revoked key", http.StatusUnauthorized, st, body)
	if c := b.counts(t, "q"); c.Active != 5 {
		t.Errorf("active messages = %d; want the 5 sends that were allowed", c.Active)
	}
	// The configured keys keep working alongside.
	st, body = do(http.MethodGet, "/q", "root", "key")
	want("configured root key", http.StatusOK, st, body)
}
