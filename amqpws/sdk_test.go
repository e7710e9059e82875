package amqpws_test

import (
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbgate/sbgate/amqpws"
)

// TestSDKOverWebSockets sends, receives and settles with the Go Service Bus SDK through
// sbgate's WebSocket endpoint only: with each subprotocol the SDKs offer, with and without the
// trailing slash .NET adds, over the plain and the TLS listener.
func TestSDKOverWebSockets(t *testing.T) {
	b := newBroker(t, amqpws.Options{})
	for _, tls := range []bool{false, true} {
		for _, proto := range []string{amqpws.SubprotocolAMQPWSB10, amqpws.SubprotocolAMQP} {
			for _, slash := range []bool{false, true} {
				name := fmt.Sprintf("tls=%v/%s/slash=%v", tls, proto, slash)
				queue := fmt.Sprintf("q-%v-%s-%v", tls, proto, slash)
				b.createQueue(t, queue)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					chosen := make(chan string, 1)
					c := b.sdkClient(t, tls, slash, proto, chosen)
					ctx := ctxT(t)
					s, err := c.NewSender(queue, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close(ctx)
					for _, body := range []string{"complete me", "abandon me"} {
						if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
							t.Fatalf("send: %v", err)
						}
					}
					if got := <-chosen; got != proto {
						t.Errorf("subprotocol chosen %q, want %q", got, proto)
					}

					r, err := c.NewReceiverForQueue(queue, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close(ctx)
					var got []*azservicebus.ReceivedMessage
					for len(got) < 2 {
						msgs, err := r.ReceiveMessages(ctx, 2-len(got), nil)
						if err != nil {
							t.Fatalf("receive: %v", err)
						}
						got = append(got, msgs...)
					}
					if string(got[0].Body) != "complete me" || string(got[1].Body) != "abandon me" {
						t.Fatalf("received %q, %q", got[0].Body, got[1].Body)
					}
					if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
						t.Fatalf("complete: %v", err)
					}
					if err := r.AbandonMessage(ctx, got[1], nil); err != nil {
						t.Fatalf("abandon: %v", err)
					}
					again, err := r.ReceiveMessages(ctx, 1, nil)
					if err != nil {
						t.Fatalf("receive again: %v", err)
					}
					if len(again) != 1 || string(again[0].Body) != "abandon me" || again[0].DeliveryCount != 2 {
						t.Fatalf("after abandon received %+v", again)
					}
					if err := r.CompleteMessage(ctx, again[0], nil); err != nil {
						t.Fatalf("complete: %v", err)
					}
					b.waitEmpty(t, queue)
				})
			}
		}
	}
}
