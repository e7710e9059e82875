package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// A comparison with another broker (make bench-peers): RabbitMQ measured by RunRabbitMQ, then
// sbgate's AMQP operations by Run, one after the other on the same machine, each report written
// as JSON; ComparePeers pairs their rows and WriteComparison prints them side by side, rates and
// each broker's CPU per message (sbgate's: its gateways' and its PostgreSQL's).

// peerPairs says which sbgate operation each of the other broker's compares with.
var peerPairs = map[string]string{
	OpRabbitPublish: OpAMQPSend,
	OpRabbitConsume: OpAMQPPeekLock,
}

// PeerRow is a row of the other broker's report and the rows of sbgate's that compare with it:
// the same operation at the same client count (amqp-peek-lock at every prefetch).
type PeerRow struct {
	Peer   Result
	Sbgate []Result
}

// PeerComparison is the two reports and their paired rows.
type PeerComparison struct {
	Peer, Sbgate *Report
	Rows         []PeerRow
}

// ComparePeers pairs the rows of the other broker's report with sbgate's. It fails when the
// reports are the wrong way round or no row pairs.
func ComparePeers(peer, sbgate *Report) (*PeerComparison, error) {
	if peer.Broker == "" || sbgate.Broker != "" {
		return nil, errors.New("bench: compare: want the other broker's report first, then sbgate's")
	}
	c := &PeerComparison{Peer: peer, Sbgate: sbgate}
	for _, p := range peer.Results {
		row := PeerRow{Peer: p}
		for _, s := range sbgate.Results {
			if s.Operation == peerPairs[p.Operation] && s.Clients == p.Clients {
				row.Sbgate = append(row.Sbgate, s)
			}
		}
		if len(row.Sbgate) > 0 {
			c.Rows = append(c.Rows, row)
		}
	}
	if len(c.Rows) == 0 {
		return nil, errors.New("bench: compare: no row of sbgate's report pairs with one of the other broker's " +
			"(amqp-send with rabbitmq-publish, amqp-peek-lock with rabbitmq-consume, at the same client count)")
	}
	return c, nil
}

// brokerCPU is what a row cost its broker per message: the gateways' and PostgreSQL's CPU for
// sbgate, the broker's processes' for another; negative when unknown.
func brokerCPU(r Result) time.Duration {
	gw, db := r.CPUPerMessage()
	switch {
	case gw < 0:
		return -1
	case db < 0:
		return gw
	}
	return gw + db
}

// PeerRatios are an sbgate row's rate and broker CPU per message over the other broker's row
// (the CPU ratio 0 when either is unknown).
func PeerRatios(peer, sbgate Result) (rate, cpu float64) {
	if p := peer.Rate(); p > 0 {
		rate = sbgate.Rate() / p
	}
	if p, s := brokerCPU(peer), brokerCPU(sbgate); p > 0 && s > 0 {
		cpu = float64(s) / float64(p)
	}
	return rate, cpu
}

// WriteComparison prints the comparison for a terminal.
func (c *PeerComparison) WriteComparison(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p, s := c.Peer, c.Sbgate
	fmt.Fprintf(bw, "sbgate beside %s, one after the other on the same machine\n", p.Broker)
	fmt.Fprintf(bw, "machine:   %s\n", p.Machine.summary())
	fmt.Fprintf(bw, "%-10s %s, %s; %s each, %d-byte messages; durable classic queue, persistent messages\n",
		shortName(p.Broker)+":", p.Setup, p.Started.UTC().Format("15:04 UTC"), p.Duration, p.MessageSize)
	fmt.Fprintf(bw, "sbgate:    %s, %s; %s each, %d-byte messages; %s (%s)\n",
		s.Setup, s.Started.UTC().Format("15:04 UTC"), s.Duration, s.MessageSize, s.Machine.PostgreSQL, s.Machine.Durability)
	fmt.Fprintf(bw, "           load average %.2f at the start of %s's run, %.2f at the end of sbgate's\n",
		p.Machine.LoadStart[0], shortName(p.Broker), s.Machine.LoadEnd[0])
	fmt.Fprintln(bw, "µs/msg:    the broker's CPU per message: RabbitMQ's processes; sbgate's gateways + their PostgreSQL")
	fmt.Fprintln(bw, "cpu:       cores kept busy by the load tool / the broker / the whole machine")
	fmt.Fprintln(bw)
	label := func(rep *Report, r Result) string {
		if rep == p {
			return rep.Label(r)
		}
		return "sbgate " + rep.Label(r)
	}
	width := len("operation")
	for _, row := range c.Rows {
		width = max(width, len(label(p, row.Peer)))
		for _, r := range row.Sbgate {
			width = max(width, len(label(s, r)))
		}
	}
	fmt.Fprintf(bw, "%-*s  %7s  %9s  %8s  %16s  %s\n", width, "operation", "clients", "msgs/s", "µs/msg", "cpu tool/brk/all", "vs "+shortName(p.Broker))
	line := func(rep *Report, r Result, vs string) {
		cpu := r.CPU
		brk := cpu.Gateways
		if cpu.Gateways >= 0 && cpu.Database > 0 {
			brk += cpu.Database
		}
		us := "-"
		if d := brokerCPU(r); d >= 0 {
			us = fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond))
		}
		if r.Drained {
			vs = strings.TrimPrefix(fmt.Sprintf("%s, (queue empty after %s)", vs, r.DrainedAfter.Round(100*time.Millisecond)), ", ")
		}
		fmt.Fprintf(bw, "%-*s  %7d  %9s  %8s  %16s  %s\n", width, label(rep, r), r.Clients, thousands(r.Rate()),
			us, fmt.Sprintf("%.2f/%.2f/%.2f", cpu.Tool, brk, cpu.Machine), vs)
	}
	for _, row := range c.Rows {
		line(p, row.Peer, "")
		for _, r := range row.Sbgate {
			rate, cpu := PeerRatios(row.Peer, r)
			vs := fmt.Sprintf("%.2fx rate", rate)
			if cpu > 0 {
				vs += fmt.Sprintf(", %.2fx cpu/msg", cpu)
			}
			line(s, r, vs)
		}
	}
	return bw.Flush()
}

// shortName is a broker's name without its version.
func shortName(broker string) string {
	name, _, _ := strings.Cut(broker, " ")
	return name
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(r io.Reader) (*Report, error) {
	var j jsonReport
	dec := json.NewDecoder(r)
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("bench: read report: %w", err)
	}
	seconds := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	ratio := func(q *Ratio) Ratio {
		if q == nil {
			return Ratio{}
		}
		return *q
	}
	conv := func(rs []jsonResult) []Result {
		out := make([]Result, 0, len(rs))
		for _, x := range rs {
			out = append(out, Result{
				Operation: x.Operation, Variant: x.Variant, Clients: x.Clients, Messages: x.Messages, Iterations: x.Iterations,
				Errors: x.Errors, FirstError: x.FirstError, Elapsed: seconds(x.Seconds), P50: ms(x.P50ms), P99: ms(x.P99ms),
				Requests: x.Requests, Prefetch: x.Prefetch, Drained: x.Drained, DrainedAfter: seconds(x.DrainedAfter),
				Latency: x.Latency, CPU: x.CPU, Ratios: x.Ratios, ServerCPU: ratio(x.ServerCPU), RequestCPU: ratio(x.RequestCPU),
			})
		}
		return out
	}
	return &Report{
		Started: j.Started, Elapsed: seconds(j.ElapsedSeconds), Machine: j.Machine, Broker: j.Broker, RabbitMQWindow: j.RabbitMQWindow,
		Setup: j.Setup, Gateways: j.Gateways, LoadGateways: j.LoadGateways, Duration: seconds(j.PhaseSeconds),
		MessageSize: j.MessageSize, BatchSize: j.BatchSize, SettleBatch: j.SettleBatch, Backlog: j.Backlog, Inflight: j.Inflight,
		Queues: j.Queues, Subs: j.Subscriptions, IdleSess: j.IdleSessions, Baseline: conv(j.Baseline), Results: conv(j.Results),
	}, nil
}
