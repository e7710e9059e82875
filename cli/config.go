package cli

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/sbgate/sbgate/api/client"
	"github.com/sbgate/sbgate/atom"
	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/nsconfig"
)

const configUsage = `usage:
  sbgate config apply FILE [-prune] [-dry-run]   make the broker's namespace match an emulator Config.json
  sbgate config export [-namespace NAME] [-file F] write the namespace as an emulator Config.json (stdout by default)
flags everywhere: -connection-string ($SBGATE_CONNECTION_STRING), -o table|json (apply's report), -insecure

apply checks the whole file against the namespace before it changes anything; entities the file
does not name are left alone (and listed) unless -prune. It speaks the Atom management API only,
so it works against any Service Bus namespace the key may manage.`

// configCommand runs `sbgate config apply|export`, over the HTTP API like the other commands.
func configCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stdout, configUsage)
		return nil
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("sbgate config "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	mk := cliFlags(fs, getenv, stdout)
	prune := fs.Bool("prune", false, "delete the queues, topics and subscriptions the file does not name, with their messages")
	dryRun := fs.Bool("dry-run", false, "check the file and list the changes, making none")
	nsName := fs.String("namespace", "sbemulatorns", "the namespace name written in the file (the emulator accepts only sbemulatorns)")
	file := fs.String("file", "", "write the file here instead of to standard output")
	pos, c, err := parseCLI(fs, mk, args)
	if err != nil {
		return err
	}
	ns := atomNamespace{c.api}
	switch verb {
	case "apply":
		if len(pos) != 1 {
			return usageError(configUsage, "config apply: want the file, got %d argument(s)", len(pos))
		}
		data, err := os.ReadFile(pos[0])
		if err != nil {
			return fmt.Errorf("config apply: %w", err)
		}
		f, err := nsconfig.Parse(pos[0], data)
		if err != nil {
			return err
		}
		rep, err := nsconfig.Apply(ctx, ns, f, nsconfig.Options{Prune: *prune, DryRun: *dryRun})
		if err != nil {
			var errs nsconfig.Errors
			if errors.As(err, &errs) {
				return err
			}
			return fmt.Errorf("config apply %s: %w", pos[0], err)
		}
		return c.printReport(rep, *dryRun)
	case "export":
		if len(pos) != 0 {
			return usageError(configUsage, "config export: no arguments, got %d", len(pos))
		}
		f, notes, err := nsconfig.Export(ctx, ns, *nsName)
		if err != nil {
			return fmt.Errorf("config export: %w", err)
		}
		b, err := nsconfig.Marshal(f)
		if err != nil {
			return fmt.Errorf("config export: %w", err)
		}
		for _, n := range notes {
			fmt.Fprintln(stderr, "note:", n)
		}
		if *file != "" {
			return os.WriteFile(*file, b, 0o644)
		}
		_, err = c.out.Write(b)
		return err
	}
	return usageError(configUsage, "config: unknown command %q", verb)
}

func (c *command) printReport(rep *nsconfig.Report, dryRun bool) error {
	if c.json {
		return c.emitJSON(rep)
	}
	prefix := ""
	if dryRun {
		prefix = "would "
	}
	for _, ch := range rep.Changes {
		fmt.Fprintln(c.out, prefix+ch)
	}
	for _, e := range rep.LeftAlone {
		fmt.Fprintln(c.out, "left alone (not in the file; -prune deletes): "+e)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(c.out, "note: "+n)
	}
	fmt.Fprintf(c.out, "%d change(s), %d unchanged, %d left alone\n", len(rep.Changes), rep.Unchanged, len(rep.LeftAlone))
	return nil
}

// atomNamespace is a namespace reached through the Atom management API of a running broker.
type atomNamespace struct{ api *client.ClientWithResponses }

const atomEntry = "application/atom+xml;type=entry;charset=utf-8"

// refused is the broker's refusal as an error that store's sentinels recognise where they can,
// so that nsconfig.Apply plans again when the namespace changed under it.
func refused(status int, body []byte) error {
	err := refusal(status, body)
	switch status {
	case http.StatusNotFound:
		return fmt.Errorf("%w (%v)", broker.ErrNotFound, err)
	case http.StatusConflict:
		return fmt.Errorf("%w (%v)", broker.ErrConflict, err)
	}
	return err
}

func (n atomNamespace) ListEntities(ctx context.Context, kind broker.Kind, parent string) ([]*broker.Entity, error) {
	var all []*broker.Entity
	for skip := 0; ; skip += 100 {
		s, top := client.Skip(skip), client.Top(100)
		var status int
		var body []byte
		switch kind {
		case broker.KindQueue:
			r, err := n.api.ListQueuesWithResponse(ctx, &client.ListQueuesParams{Skip: &s, Top: &top})
			if err != nil {
				return nil, err
			}
			status, body = r.StatusCode(), r.Body
		case broker.KindTopic:
			r, err := n.api.ListTopicsWithResponse(ctx, &client.ListTopicsParams{Skip: &s, Top: &top})
			if err != nil {
				return nil, err
			}
			status, body = r.StatusCode(), r.Body
		default:
			r, err := n.api.ListSubscriptionsWithResponse(ctx, parent, &client.ListSubscriptionsParams{Skip: &s, Top: &top})
			if err != nil {
				return nil, err
			}
			status, body = r.StatusCode(), r.Body
		}
		if status != http.StatusOK {
			return nil, refused(status, body)
		}
		entries, err := rawEntries(body)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			p, err := atom.DecodeProperties(e.raw, kind)
			if err != nil {
				return nil, fmt.Errorf("the broker's description of %s: %w", e.title, err)
			}
			path := e.title
			if kind == broker.KindSubscription {
				path = broker.SubscriptionPath(parent, e.title)
			}
			all = append(all, &broker.Entity{Kind: kind, Path: path, Props: p})
		}
		if len(entries) < 100 {
			return all, nil
		}
	}
}

func (n atomNamespace) ListRules(ctx context.Context, subPath string) ([]*broker.Rule, error) {
	topic, sub, _ := broker.SplitSubscriptionPath(subPath)
	var all []*broker.Rule
	for skip := 0; ; skip += 100 {
		s, top := client.Skip(skip), client.Top(100)
		r, err := n.api.ListRulesWithResponse(ctx, topic, sub, &client.ListRulesParams{Skip: &s, Top: &top})
		if err != nil {
			return nil, err
		}
		if r.StatusCode() != http.StatusOK {
			return nil, refused(r.StatusCode(), r.Body)
		}
		entries, err := rawEntries(r.Body)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			rule, err := atom.DecodeRule(e.raw, e.title)
			if err != nil {
				return nil, fmt.Errorf("the broker's rule %s of %s: %w", e.title, subPath, err)
			}
			all = append(all, &rule)
		}
		if len(entries) < 100 {
			return all, nil
		}
	}
}

// description is the Atom entry that creates or replaces an entity with properties p (a
// subscription with first as its first rule, when given).
func description(kind broker.Kind, path string, p broker.Properties, first *broker.Rule) []byte {
	body := atom.AppendEntry(nil, atom.EntryInfo{Title: path}, &broker.Entity{Kind: kind, Path: path, Props: p}, atom.EncodeOptions{})
	if first == nil {
		return body
	}
	// The first rule travels inside the SubscriptionDescription as its DefaultRuleDescription:
	// the RuleDescription the rule encoder writes, renamed.
	rule := string(atom.AppendRuleEntry(nil, atom.EntryInfo{Title: first.Name}, first))
	start, end := strings.Index(rule, "<RuleDescription"), strings.LastIndex(rule, "</RuleDescription>")
	inner := "<DefaultRuleDescription" + rule[start+len("<RuleDescription"):end] + "</DefaultRuleDescription>"
	return []byte(strings.Replace(string(body), "</SubscriptionDescription>", inner+"</SubscriptionDescription>", 1))
}

func (n atomNamespace) put(ctx context.Context, kind broker.Kind, path string, body []byte, update bool) error {
	var ifMatch *string
	want := http.StatusCreated
	if update {
		star := "*"
		ifMatch, want = &star, http.StatusOK
	}
	var status int
	var resp []byte
	if kind == broker.KindSubscription {
		topic, sub, _ := broker.SplitSubscriptionPath(path)
		r, err := n.api.PutSubscriptionWithBodyWithResponse(ctx, topic, sub, &client.PutSubscriptionParams{IfMatch: ifMatch}, atomEntry, bytes.NewReader(body))
		if err != nil {
			return err
		}
		status, resp = r.StatusCode(), r.Body
	} else {
		r, err := n.api.PutEntityWithBodyWithResponse(ctx, path, &client.PutEntityParams{IfMatch: ifMatch}, atomEntry, bytes.NewReader(body))
		if err != nil {
			return err
		}
		status, resp = r.StatusCode(), r.Body
	}
	if status != want {
		return refused(status, resp)
	}
	return nil
}

func (n atomNamespace) CreateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties, first *broker.Rule) error {
	return n.put(ctx, kind, path, description(kind, path, p, first), false)
}

func (n atomNamespace) UpdateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties) error {
	return n.put(ctx, kind, path, description(kind, path, p, nil), true)
}

func (n atomNamespace) DeleteEntity(ctx context.Context, kind broker.Kind, path string) error {
	var status int
	var body []byte
	if kind == broker.KindSubscription {
		topic, sub, _ := broker.SplitSubscriptionPath(path)
		r, err := n.api.DeleteSubscriptionWithResponse(ctx, topic, sub, nil)
		if err != nil {
			return err
		}
		status, body = r.StatusCode(), r.Body
	} else {
		r, err := n.api.DeleteEntityWithResponse(ctx, path, nil)
		if err != nil {
			return err
		}
		status, body = r.StatusCode(), r.Body
	}
	if status != http.StatusOK {
		return refused(status, body)
	}
	return nil
}

func (n atomNamespace) PutRule(ctx context.Context, subPath string, rule broker.Rule, update bool) error {
	topic, sub, _ := broker.SplitSubscriptionPath(subPath)
	var ifMatch *string
	want := http.StatusCreated
	if update {
		star := "*"
		ifMatch, want = &star, http.StatusOK
	}
	body := atom.AppendRuleEntry(nil, atom.EntryInfo{Title: rule.Name}, &rule)
	r, err := n.api.PutRuleWithBodyWithResponse(ctx, topic, sub, rule.Name, &client.PutRuleParams{IfMatch: ifMatch}, atomEntry, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if r.StatusCode() != want {
		return refused(r.StatusCode(), r.Body)
	}
	return nil
}

func (n atomNamespace) DeleteRule(ctx context.Context, subPath, name string) error {
	topic, sub, _ := broker.SplitSubscriptionPath(subPath)
	r, err := n.api.DeleteRuleWithResponse(ctx, topic, sub, name, nil)
	if err != nil {
		return err
	}
	if r.StatusCode() != http.StatusOK {
		return refused(r.StatusCode(), r.Body)
	}
	return nil
}

// rawEntry is one <entry> of a feed, as sent, with its title.
type rawEntry struct {
	title string
	raw   []byte
}

// rawEntries cuts a feed into its entries, each a document the atom decoders read on its own.
func rawEntries(feed []byte) ([]rawEntry, error) {
	var out []rawEntry
	err := forEachEntry(feed, func(d *xml.Decoder, st xml.StartElement, start int64) error {
		var e struct {
			Title string `xml:"title"`
		}
		if err := d.DecodeElement(&e, &st); err != nil {
			return err
		}
		out = append(out, rawEntry{title: e.Title, raw: feed[start:d.InputOffset()]})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
