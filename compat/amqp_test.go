package compat_test

import (
	"context"
	"net"
	"testing"

	"github.com/sbgate/sbgate/access"
	"github.com/sbgate/sbgate/amqp"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db/dbtest"
	amqpdoor "github.com/sbgate/sbgate/handlers/amqp"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

// TestJSServiceBusClientAMQP runs compat/js-admin/amqp.js: the official @azure/service-bus
// ServiceBusClient sends, receives in both modes, completes, abandons, dead-letters, defers and
// receives deferred, renews, peeks and uses a session with state, over plain AMQP.
func TestJSServiceBusClientAMQP(t *testing.T) {
	t.Parallel()
	st := store.New(dbtest.NewPool(t), store.Options{})
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	ctx := t.Context()
	if _, err := st.CreateEntity(ctx, broker.KindQueue, "js-q", broker.DefaultProperties(broker.KindQueue)); err != nil {
		t.Fatal(err)
	}
	sp := broker.DefaultProperties(broker.KindQueue)
	sp.RequiresSession = true
	if _, err := st.CreateEntity(ctx, broker.KindQueue, "js-sq", sp); err != nil {
		t.Fatal(err)
	}
	h := amqpdoor.New(amqpdoor.Config{Store: st, Access: access.New(access.Config{
		Keys: []sas.Key{{Name: "RootManageSharedAccessKey", Primary: key, Rights: sas.Manage}}, Source: st})})
	srv := amqp.NewServer(h, amqp.Options{Authenticate: h.Authenticate})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	conn := "Endpoint=sb://" + ln.Addr().String() + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + key +
		";UseDevelopmentEmulator=true"
	runNodeScript(t, "js-admin", "amqp.js", conn, []string{"QUEUE=js-q", "SESSION_QUEUE=js-sq"})
}
