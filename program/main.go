// Package program is the sbgate command, which cmd/sbgate's main runs (Main): a Service
// Bus–compatible message broker over HTTP and AMQP that keeps its messages in PostgreSQL.
//
//	sbgate [serve]   run the broker (the default)
//	sbgate migrate   apply database migrations and exit
//	sbgate token     print a SAS token for curl and other HTTP clients
//	sbgate bench     drive a running broker and report msgs/s and latency
//	sbgate key       create, list, rotate and revoke namespace keys
//	sbgate queue, topic, subscription, rule   manage entities over the HTTP API
//	sbgate send, receive, peek, dlq           messages over the HTTP API
//	sbgate config apply|export                the emulator's Config.json over the HTTP API
package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sbgate/sbgate/cli"
)

// Main runs the command with the process's arguments, environment and output, and exits with 1
// on an error.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stdin = os.Stdin
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbgate:", err)
		os.Exit(1)
	}
}

// stdin is where sbgate send reads a body from; tests replace it.
var stdin io.Reader = strings.NewReader("")

// run is the whole program: main only supplies the process's context, arguments, environment and
// output, so tests run it in-process on a free port.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := parseServeConfig(args, getenv, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stdout)
	case "migrate":
		cfg, err := parseServeConfig(args, getenv, stderr)
		if err != nil {
			return err
		}
		return migrate(ctx, cfg, stdout)
	case "token":
		return token(args, getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, args, getenv, stdout, stderr)
	case "key":
		return key(ctx, args, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	// The client commands over the HTTP API live in package cli.
	if handled, err := cli.Run(ctx, cmd, args, getenv, stdin, stdout, stderr); handled {
		return err
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

const usage = `usage: sbgate [command] [flags]

commands:
  serve    run the broker (default)
  migrate  apply database migrations and exit
  token    print a SAS token for curl and other HTTP clients
  bench    drive a running broker and report msgs/s and latency
  key      create, list, rotate and revoke namespace keys (list, create, rotate, revoke)

  over the HTTP API, with the key of SBGATE_CONNECTION_STRING (-o json for scripts):
  queue         create, list, show, delete queues
  topic         create, list, show, delete topics
  subscription  create, list, show, delete subscriptions of a topic
  rule          create, list, show, delete rules of a subscription
  send          send a message (body from an argument, a file or stdin)
  receive       peek-lock and complete (or -delete) up to -n messages
  peek          browse messages without locking them
  dlq           list, resubmit, purge dead letters
  config        apply an emulator Config.json to the namespace, or export the namespace as one

Run 'sbgate <command> -h' for the flags of a command.
`
