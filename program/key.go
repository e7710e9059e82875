package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/sas"
	"github.com/sbgate/sbgate/store"
)

const keyUsage = `usage: sbgate key <command> [flags] [name]

Namespace-level shared access keys, kept in the database. Every running gateway sees a change
within 5 seconds; no restart.

commands:
  list                               names and rights (-show-keys: the keys too)
  create -rights Send,Listen NAME    a new key with random primary and secondary keys
  rotate [-secondary] NAME           replace the primary (or secondary) key; the other is kept
  revoke NAME                        delete the key: tokens signed with it stop working

flags: -database-url ($DATABASE_URL), -data-dir ($SBGATE_DATA_DIR): the broker's database, as for
sbgate serve (with neither, the embedded PostgreSQL of the default data directory, running or not).
`

// key manages namespace keys in the database.
func key(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, keyUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("sbgate key "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keyUsage) }
	dbURL := fs.String("database-url", getenv("DATABASE_URL"), "PostgreSQL URL ($DATABASE_URL)")
	dataDir := fs.String("data-dir", getenv("SBGATE_DATA_DIR"), "data directory of the embedded PostgreSQL ($SBGATE_DATA_DIR)")
	rights := fs.String("rights", "", "create: rights, comma-separated: Send, Listen, Manage (Manage includes both others)")
	secondary := fs.Bool("secondary", false, "rotate: replace the secondary key instead of the primary")
	showKeys := fs.Bool("show-keys", false, "list: print the primary and secondary keys too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name, names, err := keyArgs(sub, fs, *rights)
	if err != nil {
		return err
	}
	if *dbURL == "" && *dataDir == "" {
		dir, err := db.DefaultDataDir(getenv)
		if err != nil {
			return err
		}
		*dataDir = dir
	}
	st, stop, err := openKeyStore(ctx, *dbURL, *dataDir)
	if err != nil {
		return err
	}
	defer stop()

	switch sub {
	case "list":
		return listKeys(ctx, st, stdout, *showKeys)
	case "create":
		k, err := st.CreateNamespaceKey(ctx, name, names)
		if err != nil {
			return fmt.Errorf("key create: %s", keyError(err))
		}
		printKey(stdout, k)
	case "rotate":
		k, err := st.RotateNamespaceKey(ctx, name, *secondary)
		if err != nil {
			return fmt.Errorf("key rotate: %s", keyError(err))
		}
		printKey(stdout, k)
	case "revoke":
		if err := st.DeleteNamespaceKey(ctx, name); err != nil {
			return fmt.Errorf("key revoke: %s", keyError(err))
		}
		fmt.Fprintf(stdout, "revoked %s\n", name)
	}
	return nil
}

// keyArgs checks the arguments of key command sub: the key name it works on ("" for list) and,
// for create, the names of the rights (-rights) in canonical spelling and order.
func keyArgs(sub string, fs *flag.FlagSet, rights string) (name string, names []string, err error) {
	switch sub {
	case "create", "rotate", "revoke":
		if fs.NArg() != 1 {
			return "", nil, fmt.Errorf("key %s: give exactly one key name\n%s", sub, keyUsage)
		}
		name = fs.Arg(0)
	case "list":
		if fs.NArg() != 0 {
			return "", nil, fmt.Errorf("key list: unexpected arguments: %s",
				strings.Join(fs.Args(), " "))
		}
	default:
		return "", nil, fmt.Errorf("unknown key command %q\n%s", sub, keyUsage)
	}
	if sub == "create" {
		if rights == "" {
			return "", nil, errors.New(
				"key create: -rights is required (Send, Listen, Manage, comma-separated)")
		}
		names = strings.Split(rights, ",")
		r, err := sas.ParseRights(names)
		if err != nil {
			return "", nil, fmt.Errorf("key create: %w", err)
		}
		names = strings.Split(r.String(), ",") // canonical spelling and order
	}
	return name, names, nil
}

// openKeyStore opens the store of the key commands' database (keyDatabase), migrated, and
// returns the function that closes it and stops what keyDatabase started.
func openKeyStore(ctx context.Context, dbURL, dataDir string) (*store.Postgres, func(), error) {
	url, stopDB, err := keyDatabase(ctx, dbURL, dataDir)
	if err != nil {
		return nil, nil, err
	}
	if _, err := db.Migrate(ctx, url); err != nil {
		stopDB()
		return nil, nil, err
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		stopDB()
		return nil, nil, err
	}
	st := store.New(pool, store.Options{Logger: slog.New(slog.DiscardHandler)})
	return st, func() { pool.Close(); stopDB() }, nil
}

// listKeys prints the namespace keys as a table: names and rights, and with showKeys the keys.
func listKeys(ctx context.Context, st *store.Postgres, stdout io.Writer, showKeys bool) error {
	keys, err := st.NamespaceKeys(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if showKeys {
		fmt.Fprintln(w, "NAME\tRIGHTS\tPRIMARY\tSECONDARY")
	} else {
		fmt.Fprintln(w, "NAME\tRIGHTS")
	}
	for _, k := range keys {
		if showKeys {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.Name, strings.Join(k.Rights, ","), k.PrimaryKey, k.SecondaryKey)
		} else {
			fmt.Fprintf(w, "%s\t%s\n", k.Name, strings.Join(k.Rights, ","))
		}
	}
	return w.Flush()
}

// keyError is the text of a store error: its client-safe message when it has one.
func keyError(err error) string {
	if m := broker.ErrorMessage(err); m != "" {
		return m
	}
	return err.Error()
}

// printKey prints a key and the part of a connection string that names it.
func printKey(w io.Writer, k broker.NamespaceKey) {
	fmt.Fprintf(w, "name:      %s\nrights:    %s\nprimary:   %s\nsecondary: %s\n", k.Name, strings.Join(k.Rights, ","), k.PrimaryKey, k.SecondaryKey)
	fmt.Fprintf(w, "connection string: Endpoint=sb://<host:port>/;SharedAccessKeyName=%s;SharedAccessKey=%s\n", k.Name, k.PrimaryKey)
}

// keyDatabase is the database the key commands work on: the URL given, or the embedded
// PostgreSQL of the data directory, started for the command or, when a broker runs it already,
// reached on its socket.
func keyDatabase(ctx context.Context, url, dataDir string) (string, func(), error) {
	if url != "" {
		return url, func() {}, nil
	}
	cfg := serveConfig{DataDir: dataDir}
	u, _, stop, err := database(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if errors.Is(err, db.ErrDataDirInUse) {
		return db.RunningEmbeddedURL(dataDir), func() {}, nil
	}
	return u, stop, err
}
