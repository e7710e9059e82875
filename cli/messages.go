package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sbgate/sbgate/api/client"
)

const messagesUsage = `usage:
  sbgate send ENTITY [BODY] [-file PATH|-] [-content-type T] [-label L] [-message-id ID]
              [-correlation-id ID] [-session-id S] [-partition-key K] [-to T] [-reply-to R]
              [-reply-to-session-id S] [-ttl 10m] [-schedule 2026-01-02T15:04:05Z] [-p name=value ...]
        the body is BODY, else the file (- for stdin), else stdin; -p values are typed:
        12 and 12.5 are numbers, true/false booleans, anything else text ("12" quoted: text)
  sbgate receive ENTITY [-n 1] [-wait 0s] [-settle complete|abandon|defer|deadletter|none] [-delete]
        peek-lock up to -n messages, waiting up to -wait for the first, then settle them
        (complete by default; none leaves them locked until their lock ends); -delete receives
        and deletes instead
  sbgate peek ENTITY [-n 10] [-from SEQ]           browse without locking (scheduled and deferred too)
  sbgate dlq list ENTITY [-n 10] [-from SEQ]       browse the dead letters
  sbgate dlq resubmit ENTITY (SEQ ... | -filter EXPR | -all)
  sbgate dlq purge ENTITY                          delete every dead letter
ENTITY is a queue, a topic (send only) or TOPIC/Subscriptions/NAME.
flags everywhere: -connection-string ($SBGATE_CONNECTION_STRING), -o table|json, -insecure`

// sendCommand runs `sbgate send`.
func sendCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbgate send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mk := cliFlags(fs, getenv, stdout)
	file := fs.String("file", "", "read the body from this file (- for stdin)")
	contentType := fs.String("content-type", "", "the body's content type (default text/plain when the body is text, else application/octet-stream)")
	str := map[string]*string{}
	for _, f := range []struct{ flag, key string }{
		{"label", "Label"}, {"message-id", "MessageId"}, {"correlation-id", "CorrelationId"},
		{"session-id", "SessionId"}, {"partition-key", "PartitionKey"}, {"to", "To"},
		{"reply-to", "ReplyTo"}, {"reply-to-session-id", "ReplyToSessionId"},
	} {
		str[f.key] = fs.String(f.flag, "", "broker property "+f.key)
	}
	ttl := fs.Duration("ttl", 0, "time to live (e.g. 10m)")
	schedule := fs.String("schedule", "", "deliver at this time (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	var props keyValues
	fs.Var(&props, "p", "a user property, name=value (repeatable)")
	pos, c, err := parseCLI(fs, mk, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageError(messagesUsage, "send: want ENTITY and at most one BODY, got %d argument(s)", len(pos))
	}
	entity := pos[0]
	body, err := sendBody(pos, *file, stdin)
	if err != nil {
		return err
	}
	bp, err := brokerProperties(str, *ttl, *schedule)
	if err != nil {
		return err
	}
	// One message as a batch of one: user properties travel in JSON, so any name (one that is
	// not an HTTP header token too) arrives, typed.
	msg := map[string]any{}
	if utf8.Valid(body) {
		msg["Body"] = string(body)
	} else {
		msg["BodyBase64"] = body
	}
	if *contentType != "" {
		bp["ContentType"] = *contentType
	} else if utf8.Valid(body) {
		bp["ContentType"] = "text/plain; charset=utf-8"
	} else {
		bp["ContentType"] = "application/octet-stream"
	}
	msg["BrokerProperties"] = bp
	if len(props.pairs) > 0 {
		up, err := userProperties(props.pairs)
		if err != nil {
			return err
		}
		msg["UserProperties"] = up
	}
	raw, err := json.Marshal([]any{msg})
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	r, err := c.api.SendMessageWithBodyWithResponse(ctx, entity, nil, "application/vnd.microsoft.servicebus.json", bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("send %s: %w", entity, err)
	}
	if err := expect(r.StatusCode(), r.Body, http.StatusCreated); err != nil {
		return fmt.Errorf("send %s: %w", entity, err)
	}
	if c.json {
		return c.emitJSON(map[string]any{"Sent": 1, "Entity": entity, "Bytes": len(body)})
	}
	fmt.Fprintf(c.out, "sent %d bytes to %s\n", len(body), entity)
	return nil
}

// sendBody is the body sbgate send sends: the second argument in pos, else file's contents (-
// for stdin), else stdin.
func sendBody(pos []string, file string, stdin io.Reader) ([]byte, error) {
	var body []byte
	var err error
	switch {
	case len(pos) == 2 && file != "":
		return nil, errors.New("send: give the body as an argument or with -file, not both")
	case len(pos) == 2:
		body = []byte(pos[1])
	case file != "" && file != "-":
		if body, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
	default:
		if body, err = readAllLimited(stdin); err != nil {
			return nil, fmt.Errorf("send: reading stdin: %w", err)
		}
	}
	return body, nil
}

// brokerProperties are the BrokerProperties that sbgate send's flags set: the string ones in
// str (by property name), -ttl and -schedule.
func brokerProperties(str map[string]*string, ttl time.Duration,
	schedule string) (map[string]any, error) {
	bp := map[string]any{}
	for k, v := range str {
		if *v != "" {
			bp[k] = *v
		}
	}
	if ttl < 0 {
		return nil, errors.New("send: -ttl: must not be negative")
	}
	if ttl > 0 {
		bp["TimeToLive"] = ttl.Seconds()
	}
	if schedule != "" {
		t, err := time.Parse(time.RFC3339, schedule)
		if err != nil {
			return nil, fmt.Errorf("send: -schedule: want RFC 3339 (2026-01-02T15:04:05Z): %w", err)
		}
		bp["ScheduledEnqueueTimeUtc"] = t.UTC().Format(http.TimeFormat)
	}
	return bp, nil
}

// userProperties are the user properties of sbgate send's -p flags, typed (propertyValue).
func userProperties(pairs [][2]string) (map[string]json.RawMessage, error) {
	up := map[string]json.RawMessage{}
	for _, p := range pairs {
		if _, dup := up[p[0]]; dup {
			return nil, fmt.Errorf("send: -p %s given twice", p[0])
		}
		up[p[0]] = json.RawMessage(propertyValue(p[1]))
	}
	return up, nil
}

// propertyValue is a user property's JSON value: numbers and booleans as they are, anything else
// as text; a value in double quotes is text without its quotes.
func propertyValue(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		raw, _ := json.Marshal(v[1 : len(v)-1])
		return string(raw)
	}
	if v == "true" || v == "false" {
		return v
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil && json.Valid([]byte(v)) {
		return v
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

var dispositions = map[string]client.SettlementDisposition{
	"complete": "Complete", "abandon": "Abandon", "defer": "Defer", "deadletter": "DeadLetter",
}

// receiveCommand runs `sbgate receive`.
func receiveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbgate receive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mk := cliFlags(fs, getenv, stdout)
	n := fs.Int("n", 1, "receive up to this many messages (at most 1000)")
	wait := fs.Duration("wait", 0, "wait this long for a message when there is none")
	settle := fs.String("settle", "complete", "what to do with the peek-locked messages: complete, abandon, defer, deadletter, or none (keep the lock)")
	del := fs.Bool("delete", false, "receive-and-delete instead of peek-lock")
	pos, c, err := parseCLI(fs, mk, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(messagesUsage, "receive: want one ENTITY, got %d argument(s)", len(pos))
	}
	if *n < 1 || *n > 1000 {
		return fmt.Errorf("receive: -n: want 1 to 1000, got %d", *n)
	}
	if *wait < 0 {
		return errors.New("receive: -wait: must not be negative")
	}
	disp, ok := dispositions[*settle]
	if !ok && *settle != "none" {
		return fmt.Errorf("receive: -settle: want complete, abandon, defer, deadletter or none, got %q", *settle)
	}
	entity := pos[0]
	timeout := int((*wait + time.Second - 1) / time.Second)
	if *del {
		msgs, err := c.receiveAndDelete(ctx, entity, n, &timeout)
		if err != nil {
			return err
		}
		return c.printMessages(msgs, false)
	}
	msgs, err := c.peekLock(ctx, entity, n, &timeout)
	if err != nil {
		return err
	}
	if len(msgs) > 0 && *settle != "none" {
		failed, total, err := c.settle(ctx, entity, msgs, disp)
		if err != nil {
			return err
		}
		if len(failed) > 0 {
			_ = c.printMessages(msgs, false)
			return fmt.Errorf("receive %s: %s failed for %d of %d messages: %s", entity, *settle,
				len(failed), total, strings.Join(failed, "; "))
		}
	}
	return c.printMessages(msgs, false)
}

// receiveAndDelete receives up to n messages from entity, waiting up to timeout seconds for
// the first.
func (c *command) receiveAndDelete(ctx context.Context, entity string,
	n, timeout *int) ([]client.Message, error) {
	r, err := c.api.ReceiveAndDeleteBatchWithResponse(ctx, entity,
		&client.ReceiveAndDeleteBatchParams{Count: n, Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("receive %s: %w", entity, err)
	}
	if err := expect(r.StatusCode(), r.Body, http.StatusOK, http.StatusNoContent); err != nil {
		return nil, fmt.Errorf("receive %s: %w", entity, err)
	}
	if r.JSON200 == nil {
		return nil, nil
	}
	return *r.JSON200, nil
}

// peekLock locks up to n messages of entity, waiting up to timeout seconds for the first.
func (c *command) peekLock(ctx context.Context, entity string,
	n, timeout *int) ([]client.Message, error) {
	r, err := c.api.PeekLockBatchWithResponse(ctx, entity,
		&client.PeekLockBatchParams{Count: n, Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("receive %s: %w", entity, err)
	}
	if err := expect(r.StatusCode(), r.Body, http.StatusCreated, http.StatusOK, http.StatusNoContent); err != nil {
		return nil, fmt.Errorf("receive %s: %w", entity, err)
	}
	var msgs []client.Message
	if len(bytes.TrimSpace(r.Body)) > 0 {
		if err := json.Unmarshal(r.Body, &msgs); err != nil {
			return nil, fmt.Errorf("receive %s: the broker's answer is not a JSON array: %w",
				entity, err)
		}
	}
	return msgs, nil
}

// settle settles the locked msgs of entity with disp in one request: failed describes each
// settlement the broker refused, of total.
func (c *command) settle(ctx context.Context, entity string, msgs []client.Message,
	disp client.SettlementDisposition) (failed []string, total int, err error) {
	var body client.SettleMessagesJSONRequestBody
	for _, m := range msgs {
		if m.BrokerProperties == nil || m.BrokerProperties.LockToken == nil {
			return nil, 0, fmt.Errorf("receive %s: a locked message came without its LockToken",
				entity)
		}
		body = append(body, client.Settlement{Disposition: disp, LockToken: *m.BrokerProperties.LockToken})
	}
	sr, err := c.api.SettleMessagesWithResponse(ctx, entity, nil, body)
	if err != nil {
		return nil, 0, fmt.Errorf("receive %s: settling: %w", entity, err)
	}
	if err := expect(sr.StatusCode(), sr.Body, http.StatusOK); err != nil {
		return nil, 0, fmt.Errorf("receive %s: settling: %w", entity, err)
	}
	var results []client.SettlementResult
	if err := json.Unmarshal(sr.Body, &results); err != nil {
		return nil, 0, fmt.Errorf("receive %s: settling: the broker's answer is not a JSON array: %w",
			entity, err)
	}
	for _, res := range results {
		if res.Status != http.StatusOK {
			d := ""
			if res.Detail != nil {
				d = ": " + *res.Detail
			}
			failed = append(failed, fmt.Sprintf("lock %s: %d %s%s", res.LockToken, res.Status, http.StatusText(res.Status), d))
		}
	}
	return failed, len(results), nil
}

// browseCommand runs `sbgate peek` and `sbgate dlq list`.
func browseCommand(ctx context.Context, name string, dlq bool, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	mk := cliFlags(fs, getenv, stdout)
	n := fs.Int("n", 10, "show up to this many messages (at most 1000)")
	from := fs.Int64("from", 0, "first sequence number")
	pos, c, err := parseCLI(fs, mk, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(messagesUsage, "%s: want one ENTITY, got %d argument(s)", name, len(pos))
	}
	if *n < 1 || *n > 1000 {
		return fmt.Errorf("%s: -n: want 1 to 1000, got %d", name, *n)
	}
	path := pos[0]
	if dlq {
		path += "/$DeadLetterQueue"
	}
	r, err := c.api.BrowseMessagesWithResponse(ctx, path, &client.BrowseMessagesParams{From: from, Count: n})
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, pos[0], err)
	}
	if err := expect(r.StatusCode(), r.Body, http.StatusOK); err != nil {
		return fmt.Errorf("%s %s: %w", name, pos[0], err)
	}
	var msgs []client.Message
	if r.JSON200 != nil {
		msgs = *r.JSON200
	}
	return c.printMessages(msgs, dlq)
}

// dlqCommand runs `sbgate dlq list|resubmit|purge`.
func dlqCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stdout, messagesUsage)
		return nil
	}
	verb, args := args[0], args[1:]
	if verb == "list" {
		return browseCommand(ctx, "dlq list", true, args, getenv, stdout, stderr)
	}
	if verb != "resubmit" && verb != "purge" {
		return usageError(messagesUsage, "dlq: unknown command %q", verb)
	}
	fs := flag.NewFlagSet("sbgate dlq "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	mk := cliFlags(fs, getenv, stdout)
	var filter *string
	var all *bool
	if verb == "resubmit" {
		filter = fs.String("filter", "", "resubmit the dead letters matching this SQL filter (e.g. \"DeadLetterReason = 'MaxDeliveryCountExceeded'\")")
		all = fs.Bool("all", false, "resubmit every dead letter")
	}
	pos, c, err := parseCLI(fs, mk, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usageError(messagesUsage, "dlq %s: want ENTITY", verb)
	}
	dl := deadLetters{c: c, entity: pos[0], path: pos[0] + "/$DeadLetterQueue"}
	if verb == "purge" {
		if len(pos) != 1 {
			return usageError(messagesUsage, "dlq purge: want one ENTITY, got %d argument(s)", len(pos))
		}
		return dl.purge(ctx)
	}
	seqs := pos[1:]
	given := 0
	for _, set := range []bool{len(seqs) > 0, *filter != "", *all} {
		if set {
			given++
		}
	}
	if given != 1 {
		return usageError(messagesUsage, "dlq resubmit: give sequence numbers, -filter or -all (one of them)")
	}
	if len(seqs) == 0 {
		return dl.resubmitAll(ctx, filter)
	}
	return dl.resubmit(ctx, seqs)
}

// deadLetters is the dead-letter queue (at path) of entity, as sbgate dlq purge and resubmit
// work on it.
type deadLetters struct {
	c      *command
	entity string
	path   string
}

// report says how many dead letters were purged or resubmitted (what: "Purged",
// "Resubmitted").
func (dl deadLetters) report(what string, n int) error {
	if dl.c.json {
		return dl.c.emitJSON(map[string]any{what: n, "Entity": dl.entity})
	}
	fmt.Fprintf(dl.c.out, "%s %d dead letters of %s\n", strings.ToLower(what), n, dl.entity)
	return nil
}

// purge deletes every dead letter.
func (dl deadLetters) purge(ctx context.Context) error {
	r, err := dl.c.api.PurgeMessagesWithResponse(ctx, dl.path, nil)
	if err != nil {
		return fmt.Errorf("dlq purge %s: %w", dl.entity, err)
	}
	if err := expect(r.StatusCode(), r.Body, http.StatusOK); err != nil {
		return fmt.Errorf("dlq purge %s: %w", dl.entity, err)
	}
	return dl.report("Purged", countOf(r.Body))
}

// resubmitAll resubmits every dead letter, or those matching the SQL filter when it is not
// empty.
func (dl deadLetters) resubmitAll(ctx context.Context, filter *string) error {
	var params client.ResubmitAllParams
	if *filter != "" {
		params.Filter = filter
	}
	r, err := dl.c.api.ResubmitAllWithResponse(ctx, dl.path, &params)
	if err != nil {
		return fmt.Errorf("dlq resubmit %s: %w", dl.entity, err)
	}
	if err := expect(r.StatusCode(), r.Body, http.StatusOK); err != nil {
		return fmt.Errorf("dlq resubmit %s: %w", dl.entity, err)
	}
	return dl.report("Resubmitted", countOf(r.Body))
}

// resubmit resubmits the dead letters with the sequence numbers seqs, one request each; when
// one fails it still reports those resubmitted before it.
func (dl deadLetters) resubmit(ctx context.Context, seqs []string) error {
	total := 0
	for _, s := range seqs {
		seq, err := strconv.ParseInt(s, 10, 64)
		if err != nil || seq < 0 {
			return fmt.Errorf("dlq resubmit %s: %q is not a sequence number", dl.entity, s)
		}
		r, err := dl.c.api.ResubmitOneWithResponse(ctx, dl.path, seq, nil)
		if err != nil {
			return fmt.Errorf("dlq resubmit %s %d: %w", dl.entity, seq, err)
		}
		if err := expect(r.StatusCode(), r.Body, http.StatusOK); err != nil {
			if total > 0 {
				_ = dl.report("Resubmitted", total)
			}
			return fmt.Errorf("dlq resubmit %s %d: %w", dl.entity, seq, err)
		}
		total += countOf(r.Body)
	}
	return dl.report("Resubmitted", total)
}

func countOf(body []byte) int {
	var cr struct{ Count int }
	_ = json.Unmarshal(body, &cr)
	return cr.Count
}

// printMessages shows messages: a table with a body preview, or the broker's JSON objects.
func (c *command) printMessages(msgs []client.Message, dlq bool) error {
	if c.json {
		if msgs == nil {
			msgs = []client.Message{}
		}
		return c.emitJSON(msgs)
	}
	if len(msgs) == 0 {
		fmt.Fprintln(c.out, "no messages")
		return nil
	}
	header := []string{"SEQ", "STATE", "ENQUEUED", "MESSAGE-ID", "LABEL", "PROPERTIES", "BODY"}
	if dlq {
		header = []string{"SEQ", "ENQUEUED", "MESSAGE-ID", "REASON", "DESCRIPTION", "PROPERTIES", "BODY"}
	}
	var rows [][]string
	for _, m := range msgs {
		bp := m.BrokerProperties
		if bp == nil {
			bp = &client.BrokerProperties{}
		}
		s := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		seq := ""
		if bp.SequenceNumber != nil {
			seq = strconv.FormatInt(*bp.SequenceNumber, 10)
		}
		state := ""
		if bp.State != nil {
			state = string(*bp.State)
		}
		var props []string
		if m.UserProperties != nil {
			for k, v := range *m.UserProperties {
				props = append(props, fmt.Sprintf("%s=%v", k, v))
			}
		}
		slices.Sort(props)
		row := []string{seq, state, s(bp.EnqueuedTimeUtc), s(bp.MessageId), s(bp.Label), strings.Join(props, " "), bodyPreview(m)}
		if dlq {
			row = []string{seq, s(bp.EnqueuedTimeUtc), s(bp.MessageId), s(bp.DeadLetterReason), s(bp.DeadLetterErrorDescription), strings.Join(props, " "), bodyPreview(m)}
		}
		rows = append(rows, row)
	}
	return c.table(header, rows)
}

// bodyPreview is the start of a body: its text, or hex for a binary one.
func bodyPreview(m client.Message) string {
	const max = 60
	if m.Body != nil {
		b := *m.Body
		if utf8.RuneCountInString(b) > max {
			b = string([]rune(b)[:max]) + "…"
		}
		return b
	}
	if m.BodyBase64 != nil {
		b := *m.BodyBase64
		more := ""
		if len(b) > max/3 {
			b, more = b[:max/3], "…"
		}
		return fmt.Sprintf("(%d bytes) %x%s", len(*m.BodyBase64), b, more)
	}
	return ""
}
