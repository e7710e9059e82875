package amqp

import (
	"encoding/binary"
	"testing"
)

// Benchmarks of the engine's hot paths, driven by a raw client that pipelines frames so
// the numbers are mostly the server's: deliveries received and settled (an SDK sender),
// and deliveries sent and settled by the peer (an SDK receiver with prefetch).

func BenchmarkReceiveAndSettle(b *testing.B) {
	_, addr := newTestBroker(b, Options{SessionWindow: 1 << 30}, func(br *testBroker) {
		br.quiet = true
		br.onAttach = func(req *AttachRequest) bool {
			if _, err := req.AcceptReceiver(br, ReceiverOptions{Credit: 1 << 30}); err != nil {
				b.Errorf("AcceptReceiver: %v", err)
			}
			return true
		}
		br.onDeliver = func(l *ReceiverLink, d *Delivery) { _ = d.Accept() }
	})
	r := rawDial(b, addr)
	r.handshake(nil)
	r.begin(1)
	r.attachSender(1, 0, "bench")
	payload, _ := Marshal(&Message{Properties: &Properties{MessageID: "id"}, Data: [][]byte{make([]byte, 256)}})
	done := make(chan int)
	go func() {
		settled := 0
		for settled < b.N {
			f, err := r.next()
			if err != nil {
				break
			}
			if d, ok := f.Body.(*Disposition); ok {
				last := d.First
				if d.Last != nil {
					last = *d.Last
				}
				settled = int(last) + 1
			}
		}
		done <- settled
	}()
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	var batch []byte
	tag := make([]byte, 8)
	for i := range b.N {
		binary.BigEndian.PutUint64(tag, uint64(i))
		batch, _ = AppendFrame(batch, FrameTypeAMQP, 1, &Transfer{Handle: 0, DeliveryID: ptr(uint32(i)), DeliveryTag: tag,
			MessageFormat: ptr(uint32(0)), Payload: payload})
		if len(batch) > 32<<10 || i == b.N-1 {
			if _, err := r.nc.Write(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if n := <-done; n < b.N {
		b.Fatalf("%d of %d settled", n, b.N)
	}
	b.StopTimer()
	_ = r.nc.Close()
}

func BenchmarkSendAndSettle(b *testing.B) {
	br, addr := newTestBroker(b, Options{}, func(br *testBroker) { br.quiet = true })
	payload, _ := Marshal(&Message{Properties: &Properties{MessageID: "id"}, Data: [][]byte{make([]byte, 256)}})
	r := rawDial(b, addr)
	r.handshake(nil)
	r.send(1, &Begin{IncomingWindow: 1 << 30, OutgoingWindow: 1000, HandleMax: 10})
	expect[*Begin](r)
	r.send(1, &Attach{Name: "out", Handle: 0, Role: RoleReceiver, Source: &Source{Address: "out"}, Target: &Target{}})
	expect[*Attach](r)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	go func() {
		for range b.N {
			br.enqueue("out", queued{payload: payload})
		}
	}()
	// Prefetch 100: grant credit as deliveries arrive, settle them in ranges.
	const prefetch = 100
	flow := func(dc uint32) {
		r.send(1, &Flow{NextIncomingID: ptr(dc), IncomingWindow: 1 << 30, NextOutgoingID: 0, OutgoingWindow: 1000,
			Handle: ptr(uint32(0)), DeliveryCount: ptr(dc), LinkCredit: ptr(uint32(prefetch))})
	}
	flow(0)
	received := 0
	for received < b.N {
		f, err := r.next()
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := f.Body.(*Transfer); !ok {
			continue
		}
		received++
		if received%(prefetch/2) == 0 || received == b.N {
			first := uint32(received - prefetch/2)
			if received == b.N {
				first = uint32(received - received%(prefetch/2))
				if received%(prefetch/2) == 0 {
					first = uint32(received - prefetch/2)
				}
			}
			r.send(1, &Disposition{Role: RoleReceiver, First: first, Last: ptr(uint32(received - 1)), Settled: true, State: Accepted{}})
			flow(uint32(received))
		}
	}
	b.StopTimer()
	_ = r.nc.Close()
}
