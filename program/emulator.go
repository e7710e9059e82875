package program

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/sbgate/sbgate/broker"
	"github.com/sbgate/sbgate/emulator"
	"github.com/sbgate/sbgate/nsconfig"
)

// readConfigFile reads and checks the emulator Config.json at path (nil for no path).
func readConfigFile(path string) (*nsconfig.File, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-config: %w", err)
	}
	return nsconfig.Parse(path, data)
}

// applyConfigFile makes the namespace match the file declared with -config.
func applyConfigFile(ctx context.Context, cfg serveConfig, st broker.Store, f *nsconfig.File, log *slog.Logger) error {
	rep, err := nsconfig.Apply(ctx, nsconfig.StoreNamespace(st), f, nsconfig.Options{Prune: cfg.ConfigPrune, Logger: log})
	var errs nsconfig.Errors
	if errors.As(err, &errs) {
		return err // every line names the file
	}
	if err != nil {
		return fmt.Errorf("apply %s: %w", cfg.ConfigFile, err)
	}
	log.Info("configuration file applied", "file", cfg.ConfigFile, "namespace", f.Namespace, "queues", len(f.Queues), "topics", len(f.Topics),
		"changes", len(rep.Changes), "unchanged", rep.Unchanged, "left_alone", len(rep.LeftAlone), "prune", cfg.ConfigPrune)
	if f.Logging != "" {
		log.Info("configuration file: Logging.Type is the emulator's log sink; sbgate logs here, to its output", "type", f.Logging)
	}
	return nil
}

// announceEmulatorMode says, before anything else, that this is emulator mode and what that
// means, as Azurite does with its well-known account key.
func announceEmulatorMode(log *slog.Logger, cfg serveConfig) {
	log.Warn("emulator mode: for development and tests only. The key " + emulator.Key + " is public (every copy of the emulator's " +
		"connection string has it): whoever reaches these ports can read, send and manage everything. Never run it where others can connect.")
	for _, name := range cfg.EmulatorIgnored {
		log.Info("ignored: a setting of the emulator's container that sbgate does not need (it keeps its data in PostgreSQL)", "variable", name)
	}
}

// announceEmulatorReady logs the emulator's connection strings and, last, its readiness line,
// once every listener serves and the configuration file is applied.
func announceEmulatorReady(log *slog.Logger, amqpAddr, httpAddr string) {
	if amqpAddr != "" {
		host, port := hostAndPort(amqpAddr)
		log.Info("emulator connection string (data clients)", "connection_string", emulator.ConnectionString(host, port))
	}
	if httpAddr != "" {
		host, port := hostAndPort(httpAddr)
		// The same port serves AMQP too, so this one string serves both kinds of client.
		log.Info("emulator connection string (administration clients, and data clients too)",
			"connection_string", emulator.ConnectionString(host, port), "health", "http://"+net.JoinHostPort(host, strconv.Itoa(port))+emulator.HealthPath)
	}
	log.Info(emulator.ReadyLine)
}

// hostAndPort splits a listener's address, naming a wildcard host localhost.
func hostAndPort(addr string) (string, int) {
	host, port := publicHostPort(addr), 0
	if h, p, err := net.SplitHostPort(host); err == nil {
		host = h
		port, _ = strconv.Atoi(p)
	}
	if host == "127.0.0.1" || host == "::1" {
		host = "localhost"
	}
	return host, port
}
