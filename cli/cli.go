// Package cli is sbgate's client commands: queue, topic, subscription, rule, send, receive,
// peek, dlq and config, the command line of a namespace over its HTTP API. Package program runs
// them; the broker itself is elsewhere.
package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sbgate/sbgate/api/client"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/sas"
)

// The entity and message commands (queue, topic, subscription, rule, send, receive, peek, dlq)
// are clients of the broker's HTTP API, through the client generated from openapi.yaml, signed
// with the key of SBGATE_CONNECTION_STRING. They never open the database: what they can do is
// what that key may do, and every refusal is the broker's own answer.

// Run runs the client command name with args; handled is false when name is none of them
// (queue, topic, subscription, rule, send, receive, peek, dlq, config).
// getenv gives the environment (SBGATE_CONNECTION_STRING), stdin the body of a send that names
// no other.
func Run(ctx context.Context, name string, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (handled bool, err error) {
	switch name {
	case "queue":
		return true, entityCommand(ctx, queueKind, args, getenv, stdout, stderr)
	case "topic":
		return true, entityCommand(ctx, topicKind, args, getenv, stdout, stderr)
	case "subscription":
		return true, entityCommand(ctx, subscriptionKind, args, getenv, stdout, stderr)
	case "rule":
		return true, entityCommand(ctx, ruleKind, args, getenv, stdout, stderr)
	case "send":
		return true, sendCommand(ctx, args, getenv, stdin, stdout, stderr)
	case "receive":
		return true, receiveCommand(ctx, args, getenv, stdout, stderr)
	case "peek":
		return true, browseCommand(ctx, "peek", false, args, getenv, stdout, stderr)
	case "dlq":
		return true, dlqCommand(ctx, args, getenv, stdout, stderr)
	case "config":
		return true, configCommand(ctx, args, getenv, stdout, stderr)
	}
	return false, nil
}

// command is what every such command shares: the API client and the output format.
type command struct {
	api  *client.ClientWithResponses
	json bool
	out  io.Writer
}

// cliFlags adds the flags every API command takes to fs and returns a function that, after
// parsing, builds the client.
func cliFlags(fs *flag.FlagSet, getenv func(string) string, stdout io.Writer) func() (*command, error) {
	conn := fs.String("connection-string", getenv("SBGATE_CONNECTION_STRING"), "the broker's connection string ($SBGATE_CONNECTION_STRING)")
	output := fs.String("o", "table", "output: table, or json for scripts")
	insecure := fs.Bool("insecure", false, "skip TLS certificate checks (a test certificate)")
	return func() (*command, error) {
		if *output != "table" && *output != "json" {
			return nil, fmt.Errorf("-o: want table or json, got %q", *output)
		}
		if *conn == "" {
			return nil, fmt.Errorf("-connection-string (or SBGATE_CONNECTION_STRING) is required")
		}
		cs, err := sas.ParseConnectionString(*conn, "http")
		if err != nil {
			return nil, err
		}
		server := cs.Endpoint.String()
		hc := &http.Client{}
		if *insecure {
			hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // asked for with -insecure
		}
		sign := func(_ context.Context, req *http.Request) error {
			if cs.Signature != "" {
				req.Header.Set("Authorization", cs.Signature)
				return nil
			}
			// A token for the whole namespace, fresh for every request: a long receive or a
			// script that runs for hours never sends an expired one.
			req.Header.Set("Authorization", sas.Sign(server, cs.KeyName, cs.Key, time.Now().Add(time.Hour)))
			return nil
		}
		api, err := client.NewClientWithResponses(server, client.WithHTTPClient(hc), client.WithRequestEditorFn(sign))
		if err != nil {
			return nil, err
		}
		return &command{api: api, json: *output == "json", out: stdout}, nil
	}
}

// parseCLI parses a command's arguments into fs, which has cliFlags's flags (mk their client),
// and makes the command's client: it returns the positional arguments and the client. A
// client error begins with the command, the flag set's name without "sbgate ".
func parseCLI(fs *flag.FlagSet, mk func() (*command, error), args []string) ([]string, *command, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	c, err := mk()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", strings.TrimPrefix(fs.Name(), "sbgate "), err)
	}
	return pos, c, nil
}

// parseInterspersed parses fs allowing flags after positional arguments (`sbgate queue create
// orders -p LockDuration=PT1M`), and returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// brokerError is a refusal by the broker: its status and the Detail of its error body.
type brokerError struct {
	status int
	detail string
}

func (e *brokerError) Error() string {
	s := fmt.Sprintf("%d %s", e.status, http.StatusText(e.status))
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

// refusal turns a response the command did not expect into an error carrying the broker's status
// and detail (the <Error><Detail> of its body, else the body's text).
func refusal(status int, body []byte) error {
	var e struct {
		Detail string `xml:"Detail"`
	}
	detail := strings.TrimSpace(string(body))
	if xml.Unmarshal(body, &e) == nil && e.Detail != "" {
		detail = e.Detail
	}
	detail = broker.ClipTo(detail, 2000) // never cuts a rune
	return &brokerError{status: status, detail: detail}
}

// expect returns nil when status is one of want, else the broker's refusal.
func expect(status int, body []byte, want ...int) error {
	for _, w := range want {
		if status == w {
			return nil
		}
	}
	return refusal(status, body)
}

// emitJSON writes v as indented JSON.
func (c *command) emitJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes rows under a header, aligned.
func (c *command) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i := range r {
			r[i] = oneLine(r[i])
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// oneLine keeps a table cell on its line: control characters (a body's newlines, a terminal
// escape sequence in a property) are shown as escapes, never written raw to the terminal.
func oneLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// keyValues is a repeatable Name=Value flag, kept in the order given.
type keyValues struct{ pairs [][2]string }

func (kv *keyValues) String() string {
	if kv == nil {
		return ""
	}
	var s []string
	for _, p := range kv.pairs {
		s = append(s, p[0]+"="+p[1])
	}
	return strings.Join(s, ",")
}

func (kv *keyValues) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want Name=Value, got %q", s)
	}
	kv.pairs = append(kv.pairs, [2]string{name, value})
	return nil
}

// usageError is a mistake on the command line; it is shown with the command's usage.
func usageError(usage string, format string, args ...any) error {
	return fmt.Errorf("%s\n%s", fmt.Sprintf(format, args...), usage)
}

// readAllLimited reads a body the user supplies (a file or stdin).
func readAllLimited(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	_, err := io.Copy(&buf, r)
	return buf.Bytes(), err
}
