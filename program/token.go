package program

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbgate/sbgate/sas"
)

// token prints an Authorization header value for curl and other plain HTTP clients.
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbgate token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := fs.String("connection-string", getenv("SBGATE_CONNECTION_STRING"), "the broker's connection string ($SBGATE_CONNECTION_STRING)")
	resource := fs.String("resource", "", "resource URI the token is scoped to (default: the whole namespace)")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conn == "" {
		return fmt.Errorf("token: -connection-string (or SBGATE_CONNECTION_STRING) is required")
	}
	cs, err := sas.ParseConnectionString(*conn, "http")
	if err != nil {
		return err
	}
	uri := cs.Endpoint.String()
	if *resource != "" {
		uri = strings.TrimSuffix(uri, "/") + "/" + strings.TrimPrefix(*resource, "/")
	}
	if cs.Signature != "" {
		fmt.Fprintln(stdout, cs.Signature)
		return nil
	}
	fmt.Fprintln(stdout, sas.Sign(uri, cs.KeyName, cs.Key, time.Now().Add(*ttl)))
	return nil
}
