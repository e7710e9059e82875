package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// peerReports are a RabbitMQ report and an sbgate one as make bench-peers writes them.
func peerReports() (rabbit, sbgate *Report) {
	sec := 10 * time.Second
	rabbit = &Report{Broker: "RabbitMQ 3.10.8", RabbitMQWindow: 100, Setup: "RabbitMQ 3.10.8 at amqp://127.0.0.1:5672/",
		Duration: sec, MessageSize: 1024, Started: time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC),
		Results: []Result{
			// 200,000 messages, broker 1.0 core × 10 s: 50 µs a message.
			{Operation: OpRabbitPublish, Clients: 64, Messages: 200_000, Elapsed: sec, CPU: CPUUse{Tool: 0.3, Gateways: 1.0, Database: -1, Machine: 1.5}},
			{Operation: OpRabbitConsume, Clients: 64, Prefetch: 100, Messages: 100_000, Elapsed: sec, CPU: CPUUse{Tool: 0.4, Gateways: 1.0, Database: -1, Machine: 1.6}},
			{Operation: OpRabbitPublish, Clients: 16, Messages: 1, Elapsed: sec, CPU: CPUUse{Gateways: 1, Database: -1}}, // nothing of sbgate's at 16
		}}
	sbgate = &Report{Setup: "1 started by sbgate bench", Duration: sec, MessageSize: 1024,
		Results: []Result{
			{Operation: OpSend, Clients: 64, Messages: 1, Elapsed: sec},
			// 100,000 messages: gateways 0.6, PostgreSQL 0.4 → 100 µs a message.
			{Operation: OpAMQPSend, Clients: 64, Messages: 100_000, Elapsed: sec, CPU: CPUUse{Tool: 0.4, Gateways: 0.6, Database: 0.4, Machine: 1.8}},
			{Operation: OpAMQPPeekLock, Clients: 64, Prefetch: 20, Messages: 120_000, Elapsed: sec, CPU: CPUUse{Gateways: 0.6, Database: 0.6, Machine: 1.9}},
			{Operation: OpAMQPPeekLock, Clients: 64, Prefetch: 100, Messages: 150_000, Elapsed: sec, CPU: CPUUse{Gateways: 0.6, Database: 0.6, Machine: 1.9}, Drained: true, DrainedAfter: 5 * time.Second},
			{Operation: OpAMQPPeekLock, Clients: 1, Prefetch: 20, Messages: 5, Elapsed: sec},
		}}
	return rabbit, sbgate
}

// TestComparePeers pairs each RabbitMQ row with sbgate's of the same kind and client count, and
// compares their rates and their brokers' CPU per message.
func TestComparePeers(t *testing.T) {
	t.Parallel()
	rabbit, sbgate := peerReports()
	c, err := ComparePeers(rabbit, sbgate)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 2 {
		t.Fatalf("%d rows; want publish and consume at 64 clients", len(c.Rows))
	}
	pub, con := c.Rows[0], c.Rows[1]
	if len(pub.Sbgate) != 1 || pub.Sbgate[0].Operation != OpAMQPSend {
		t.Errorf("publish pairs with %+v; want amqp-send at 64", pub.Sbgate)
	}
	if len(con.Sbgate) != 2 || con.Sbgate[0].Prefetch != 20 || con.Sbgate[1].Prefetch != 100 {
		t.Errorf("consume pairs with %+v; want amqp-peek-lock at prefetch 20 and 100", con.Sbgate)
	}
	if rate, cpu := PeerRatios(pub.Peer, pub.Sbgate[0]); !near(rate, 0.5) || !near(cpu, 2) {
		t.Errorf("send vs publish: %v rate, %v cpu/msg; want 0.5, 2 (100 µs against 50)", rate, cpu)
	}
	if rate, cpu := PeerRatios(con.Peer, con.Sbgate[1]); !near(rate, 1.5) || !near(cpu, 0.8) {
		t.Errorf("peek-lock (100) vs consume: %v rate, %v cpu/msg; want 1.5, 0.8 (80 µs against 100)", rate, cpu)
	}
	if _, cpu := PeerRatios(con.Peer, Result{Messages: 1, Elapsed: time.Second, CPU: CPUUse{Gateways: -1, Database: 1}}); cpu != 0 {
		t.Errorf("a row without the gateways' CPU has a CPU ratio %v", cpu)
	}

	var out bytes.Buffer
	if err := c.WriteComparison(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"sbgate beside RabbitMQ 3.10.8", "rabbitmq-publish (window 100)", "rabbitmq-consume + ack (prefetch 100)",
		"sbgate amqp-send", "0.50x rate, 2.00x cpu/msg", "sbgate amqp-peek-lock + complete (prefetch 100)",
		"1.50x rate, 0.80x cpu/msg, (queue empty after 5s)", "vs RabbitMQ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, out.String())
		}
	}

	if _, err := ComparePeers(sbgate, rabbit); err == nil {
		t.Error("reports the wrong way round compared")
	}
	if _, err := ComparePeers(rabbit, &Report{Results: []Result{{Operation: OpSend, Clients: 64}}}); err == nil {
		t.Error("reports with nothing to pair compared")
	}
}

// TestReadJSON: a report read back from its JSON has what a comparison needs.
func TestReadJSON(t *testing.T) {
	t.Parallel()
	rabbit, _ := peerReports()
	rabbit.Results[0].P50, rabbit.Results[0].P99 = 1500*time.Microsecond, 20*time.Millisecond
	rabbit.Results[1].Drained, rabbit.Results[1].DrainedAfter = true, 7*time.Second
	var out bytes.Buffer
	if err := rabbit.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Broker != rabbit.Broker || back.RabbitMQWindow != 100 || back.Duration != rabbit.Duration || back.MessageSize != 1024 ||
		back.Setup != rabbit.Setup || !back.Started.Equal(rabbit.Started) {
		t.Errorf("read back %+v", back)
	}
	for i, r := range rabbit.Results {
		b := back.Results[i]
		if b.Operation != r.Operation || b.Clients != r.Clients || b.Prefetch != r.Prefetch || b.Messages != r.Messages ||
			b.Elapsed != r.Elapsed || b.CPU != r.CPU || b.P50 != r.P50 || b.P99 != r.P99 || b.Drained != r.Drained || b.DrainedAfter != r.DrainedAfter {
			t.Errorf("result %d read back as %+v; want %+v", i, b, r)
		}
	}
	if _, err := ReadJSON(strings.NewReader("{")); err == nil {
		t.Error("a broken report read")
	}
}

func TestRabbitMQConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  RabbitMQConfig
		want string
	}{
		{RabbitMQConfig{}, "URL is required"},
		{RabbitMQConfig{URL: "amqp://h/", Operations: []string{"amqp-send"}}, `unknown RabbitMQ operation "amqp-send"`},
		{RabbitMQConfig{URL: "amqp://h/", Prefetch: []int{0}}, "must be positive"},
	} {
		if _, err := RunRabbitMQ(t.Context(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RunRabbitMQ(%+v) = %v; want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
	if got := redactURL("amqp://guest:secret@127.0.0.1:5672/"); strings.Contains(got, "secret") || got != "amqp://127.0.0.1:5672/" {
		t.Errorf("redactURL = %q", got)
	}
}
