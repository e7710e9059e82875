package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/api/client"
)

// lockOf reads the sequence number and lock token of a peek-locked message from its
// BrokerProperties, as a client of the generated API does.
func lockOf(t *testing.T, raw *string) (string, uuid.UUID) {
	t.Helper()
	if raw == nil {
		t.Fatal("peek-lock: no BrokerProperties header")
	}
	var bp client.BrokerProperties
	if err := json.Unmarshal([]byte(*raw), &bp); err != nil {
		t.Fatalf("peek-lock: BrokerProperties %q: %v", *raw, err)
	}
	if bp.SequenceNumber == nil || bp.LockToken == nil {
		t.Fatalf("peek-lock: BrokerProperties %q has no SequenceNumber or LockToken", *raw)
	}
	return strconv.FormatInt(*bp.SequenceNumber, 10), *bp.LockToken
}

// TestGeneratedClient drives the API through the client generated from openapi.yaml.
func TestGeneratedClient(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	api := b.api

	for _, path := range []string{"gen", "x/y/z"} {
		put, err := api.PutEntityWithBodyWithResponse(ctx, path, &client.PutEntityParams{ApiVersion: ptr("2021-05")},
			"application/atom+xml", strings.NewReader(entryXML("<MaxDeliveryCount>4</MaxDeliveryCount>")))
		if err != nil {
			t.Fatal(err)
		}
		if put.StatusCode() != http.StatusCreated || !strings.Contains(string(put.Body), `<title type="text">`+path+`</title>`) {
			t.Fatalf("PutEntity(%q) = %d %s; want 201 with the entry", path, put.StatusCode(), put.Body)
		}

		bp := `{"MessageId":"gen-1","Label":"via the generated client","TimeToLive":60}`
		sent, err := api.SendMessageWithBodyWithResponse(ctx, path, &client.SendMessageParams{BrokerProperties: &bp},
			"application/octet-stream", strings.NewReader("\x00\x01binary\xff"))
		if err != nil {
			t.Fatal(err)
		}
		if sent.StatusCode() != http.StatusCreated {
			t.Fatalf("SendMessage(%q) = %d %s; want 201", path, sent.StatusCode(), sent.Body)
		}

		got, err := api.GetEntityWithResponse(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got.Body), "<MessageCount>1</MessageCount>") || !strings.Contains(string(got.Body), "<MaxDeliveryCount>4</MaxDeliveryCount>") {
			t.Errorf("GetEntity(%q) = %s; want one message and MaxDeliveryCount 4", path, got.Body)
		}

		peek, err := api.PeekLockMessageWithResponse(ctx, path, &client.PeekLockMessageParams{Timeout: ptr(0)})
		if err != nil {
			t.Fatal(err)
		}
		if peek.StatusCode() != http.StatusCreated || peek.Headers201 == nil {
			t.Fatalf("PeekLockMessage(%q) = %d %s; want 201", path, peek.StatusCode(), peek.Body)
		}
		if string(peek.Body) != "\x00\x01binary\xff" || peek.HTTPResponse.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("PeekLockMessage(%q): body %q, Content-Type %q; want the bytes sent", path, peek.Body, peek.HTTPResponse.Header.Get("Content-Type"))
		}
		seq, tok := lockOf(t, peek.Headers201.BrokerProperties)
		if want := fmt.Sprintf("%s/%s/messages/%s/%s", b.url, path, seq, tok); peek.Headers201.Location == nil || *peek.Headers201.Location != want {
			t.Errorf("PeekLockMessage(%q): Location = %v; want %q", path, peek.Headers201.Location, want)
		}

		renew, err := api.RenewLockWithResponse(ctx, path, seq, tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if renew.StatusCode() != http.StatusOK {
			t.Errorf("RenewLock(%q) = %d %s; want 200", path, renew.StatusCode(), renew.Body)
		}
		done, err := api.CompleteMessageWithResponse(ctx, path, seq, tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if done.StatusCode() != http.StatusOK {
			t.Errorf("CompleteMessage(%q) = %d %s; want 200", path, done.StatusCode(), done.Body)
		}
		again, err := api.CompleteMessageWithResponse(ctx, path, seq, tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.StatusCode() != http.StatusNotFound || again.XML404 == nil || again.XML404.Code != 404 ||
			!strings.Contains(again.XML404.Detail, "The lock supplied is invalid.") {
			t.Errorf("CompleteMessage(%q) again = %d %+v; want 404 with the error body", path, again.StatusCode(), again.XML404)
		}

		empty, err := api.ReceiveAndDeleteMessageWithResponse(ctx, path, &client.ReceiveAndDeleteMessageParams{Timeout: ptr(0)})
		if err != nil {
			t.Fatal(err)
		}
		if empty.StatusCode() != http.StatusNoContent || len(empty.Body) != 0 {
			t.Errorf("ReceiveAndDeleteMessage(%q) = %d %q; want 204", path, empty.StatusCode(), empty.Body)
		}
	}

	// A batch, then receive-and-delete and unlock through the client.
	batch := []client.BatchMessage{
		{Body: ptr("one"), BrokerProperties: &client.BrokerProperties{Label: ptr("L1"), TimeToLive: ptr(30.0)}},
		{Body: ptr("two"), UserProperties: &map[string]any{"Priority": "Low", "n": 2}},
	}
	raw, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := api.SendMessageWithBodyWithResponse(ctx, "x/y/z", nil, "application/vnd.microsoft.servicebus.json", strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if sent.StatusCode() != http.StatusCreated {
		t.Fatalf("SendMessage batch = %d %s; want 201", sent.StatusCode(), sent.Body)
	}
	one, err := api.ReceiveAndDeleteMessageWithResponse(ctx, "x/y/z", &client.ReceiveAndDeleteMessageParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if one.StatusCode() != http.StatusOK || string(one.Body) != "one" {
		t.Errorf("ReceiveAndDeleteMessage = %d %q; want 200 %q", one.StatusCode(), one.Body, "one")
	}
	two, err := api.PeekLockMessageWithResponse(ctx, "x/y/z", &client.PeekLockMessageParams{Timeout: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if two.StatusCode() != http.StatusCreated || two.HTTPResponse.Header.Get("Priority") != `"Low"` || two.HTTPResponse.Header.Get("n") != "2" {
		t.Fatalf("PeekLockMessage = %d %v; want 201 with Priority and n", two.StatusCode(), two.HTTPResponse.Header)
	}
	seq, tok := lockOf(t, two.Headers201.BrokerProperties)
	unlock, err := api.UnlockMessageWithResponse(ctx, "x/y/z", seq, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if unlock.StatusCode() != http.StatusOK {
		t.Errorf("UnlockMessage = %d %s; want 200", unlock.StatusCode(), unlock.Body)
	}

	list, err := api.ListQueuesWithResponse(ctx, &client.ListQueuesParams{Top: ptr(1), Skip: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if list.StatusCode() != http.StatusOK || !strings.Contains(string(list.Body), `<title type="text">gen</title>`) ||
		!strings.Contains(string(list.Body), `rel="next"`) {
		t.Errorf("ListQueues($top=1) = %d %s; want the first queue and a next link", list.StatusCode(), list.Body)
	}
	ns, err := api.GetNamespaceInfoWithResponse(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ns.StatusCode() != http.StatusOK {
		t.Errorf("GetNamespaceInfo = %d %s; want 200", ns.StatusCode(), ns.Body)
	}
	ready, err := api.ReadyzWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ready.StatusCode() != http.StatusOK {
		t.Errorf("Readyz = %d %s; want 200", ready.StatusCode(), ready.Body)
	}
	del, err := api.DeleteEntityWithResponse(ctx, "x/y/z", nil)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusOK {
		t.Errorf("DeleteEntity(x/y/z) = %d %s; want 200", del.StatusCode(), del.Body)
	}

	// Without a token the client gets the parsed 401.
	anon, err := client.NewClientWithResponses(b.url, client.WithHTTPClient(b.http))
	if err != nil {
		t.Fatal(err)
	}
	denied, err := anon.PeekLockMessageWithResponse(ctx, "gen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if denied.StatusCode() != http.StatusUnauthorized || denied.XML401 == nil || !strings.HasPrefix(denied.XML401.Detail, "MissingToken") {
		t.Errorf("PeekLockMessage without a token = %d %+v; want 401 MissingToken", denied.StatusCode(), denied.XML401)
	}
}

// TestCompetingReceivers sends 1,000 messages and lets 8 peek-lock receivers using the generated
// client compete for them: every message is completed exactly once.
func TestCompetingReceivers(t *testing.T) {
	b := setup(t, setupOptions{realClock: true})
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	const (
		total     = 1000
		perBatch  = 100
		receivers = 8
	)
	b.createQueue(t, "busy", "")
	for i := 0; i < total; i += perBatch {
		batch := make([]client.BatchMessage, perBatch)
		for j := range batch {
			batch[j] = client.BatchMessage{Body: ptr(fmt.Sprintf("m%04d", i+j))}
		}
		raw, _ := json.Marshal(batch)
		r, err := b.api.SendMessageWithBodyWithResponse(ctx, "busy", nil, "application/vnd.microsoft.servicebus.json", strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusCreated {
			t.Fatalf("send batch %d = %d %s", i/perBatch, r.StatusCode(), r.Body)
		}
	}

	var (
		mu        sync.Mutex
		seen      = map[string]int{}
		completed atomic.Int64
		wg        sync.WaitGroup
		errs      = make(chan error, receivers)
	)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each receiver has its own client and connection, as separate processes would.
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			api, err := client.NewClientWithResponses(b.url, client.WithHTTPClient(hc), client.WithRequestEditorFn(b.signWith("listener")))
			if err != nil {
				errs <- err
				return
			}
			for completed.Load() < total {
				peek, err := api.PeekLockMessageWithResponse(ctx, "busy", &client.PeekLockMessageParams{Timeout: ptr(1)})
				if err != nil {
					errs <- err
					return
				}
				switch peek.StatusCode() {
				case http.StatusNoContent:
					continue // the rest are locked by the others; wait for the count
				case http.StatusCreated:
				default:
					errs <- fmt.Errorf("peek-lock = %d %s", peek.StatusCode(), peek.Body)
					return
				}
				var bp client.BrokerProperties
				if h := peek.Headers201; h == nil || h.BrokerProperties == nil {
					errs <- fmt.Errorf("peek-lock: no BrokerProperties")
					return
				} else if err := json.Unmarshal([]byte(*h.BrokerProperties), &bp); err != nil || bp.SequenceNumber == nil || bp.LockToken == nil {
					errs <- fmt.Errorf("peek-lock: BrokerProperties %q: %v", *h.BrokerProperties, err)
					return
				}
				done, err := api.CompleteMessageWithResponse(ctx, "busy", strconv.FormatInt(*bp.SequenceNumber, 10), *bp.LockToken, nil)
				if err != nil {
					errs <- err
					return
				}
				if done.StatusCode() != http.StatusOK {
					errs <- fmt.Errorf("complete %s = %d %s", peek.Body, done.StatusCode(), done.Body)
					return
				}
				mu.Lock()
				seen[string(peek.Body)]++
				mu.Unlock()
				completed.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != total {
		t.Errorf("completed %d distinct messages; want %d", len(seen), total)
	}
	for i := range total {
		if n := seen[fmt.Sprintf("m%04d", i)]; n != 1 {
			t.Errorf("message m%04d completed %d times; want once", i, n)
		}
	}
	if c := b.counts(t, "busy"); c.Total() != 0 {
		t.Errorf("counts after the run = %+v; want none", c)
	}
}
