package program

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sbgate/sbgate/db"
	"github.com/sbgate/sbgate/emulator"
	"github.com/sbgate/sbgate/handlers/rest"
	"github.com/sbgate/sbgate/store"
)

// serveConfig is every setting of the broker, read once from flags and the environment (a flag
// wins over its variable).
type serveConfig struct {
	Listen         string
	AMQPListen     string
	AMQPSListen    string
	DataDir        string
	DatabaseURL    string
	SASKeyName     string
	SASKey         string
	TLSCert        string
	TLSKey         string
	Namespace      string
	LogLevel       slog.Level
	LogFormat      string
	MaxReceiveWait time.Duration
	SendWriters    int
	// AMQPMaxConnections and AMQPMaxHandshakes bound the AMQP connections served and those not
	// yet past their handshake (amqp.Options).
	AMQPMaxConnections int
	AMQPMaxHandshakes  int
	Recheck            time.Duration
	ShutdownGrace      time.Duration
	BodyTimeout        time.Duration
	WriteTimeout       time.Duration
	PprofListen        string
	ReadyFile          string
	// TrustedProxies are the reverse proxies whose Forwarded / X-Forwarded-* headers are believed.
	TrustedProxies []netip.Prefix
	// GCPercent is the Go collector's target, applied at start unless the operator set GOGC
	// (which the runtime has applied already): 0 leaves it alone.
	GCPercent int
	// EmbeddedRestart is how the embedded PostgreSQL is restarted after a crash: the zero value
	// is db's default (the documented one). Not a flag; tests shorten it.
	EmbeddedRestart db.RestartPolicy

	// ConfigFile is an emulator Config.json applied at start ("" for none); ConfigPrune deletes
	// the entities it does not name.
	ConfigFile  string
	ConfigPrune bool
	// MuxListen serves AMQP, AMQPS, HTTP and HTTPS (and AMQP over WebSockets) on one port
	// (package portmux), beside the other listeners; "" for none.
	MuxListen string
	// Emulator is emulator mode: the emulator's well-known key and its management port.
	Emulator bool
	// EmulatorHTTPListen is the emulator's management and health-check port, served in emulator
	// mode like MuxListen, plus GET /health.
	EmulatorHTTPListen string
	// EmulatorIgnored names the emulator container's variables that were set and mean nothing
	// here (logged at start; never their values).
	EmulatorIgnored []string
}

// envFlag describes one setting: its flag, its variable and its default.
type envFlag struct {
	name, env, def, help string
}

var serveFlags = []envFlag{
	{"listen", "SBGATE_LISTEN", "127.0.0.1:8080", "address to serve HTTP on (port 0 picks a free one)"},
	{"amqp-listen", "SBGATE_AMQP_LISTEN", "127.0.0.1:5672", "address to serve plain AMQP 1.0 on, for the Service Bus SDKs (port 0 picks a free one; \"off\" or an empty -amqp-listen= turns it off)"},
	{"amqps-listen", "SBGATE_AMQPS_LISTEN", "127.0.0.1:5671", "address to serve AMQP over TLS on when -tls-cert is given (port 0 picks a free one; \"off\" or an empty -amqps-listen= turns it off)"},
	{"data-dir", "SBGATE_DATA_DIR", "", "data directory of the embedded PostgreSQL (default: /var/lib/sbgate as root, else ~/.local/share/sbgate)"},
	{"database-url", "DATABASE_URL", "", "PostgreSQL URL; when empty sbgate runs its own embedded PostgreSQL"},
	{"sas-key-name", "SBGATE_SAS_KEY_NAME", "RootManageSharedAccessKey", "name of the namespace shared access key"},
	{"sas-key", "SBGATE_SAS_KEY", "", "the namespace key; when empty one is generated on first start and kept in the database"},
	{"tls-cert", "SBGATE_TLS_CERT", "", "certificate file: serve https (the JS and Go administration clients only speak https)"},
	{"tls-key", "SBGATE_TLS_KEY", "", "private key file for -tls-cert"},
	{"namespace", "SBGATE_NAMESPACE", "sbgate", "namespace name shown in entity descriptions and errors"},
	{"log-level", "SBGATE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"log-format", "SBGATE_LOG_FORMAT", "text", "text or json"},
	{"max-receive-wait", "SBGATE_MAX_RECEIVE_WAIT", seconds(rest.DefaultMaxReceiveWait), "longest a receive may wait for a message (its timeout is capped to this)"},
	{"send-writers", "SBGATE_SEND_WRITERS", strconv.Itoa(store.DefaultSendWriters), "group-commit writers running at once"},
	{"amqp-max-connections", "SBGATE_AMQP_MAX_CONNECTIONS", "10000", "AMQP connections served at once (TCP, TLS and WebSocket together); at the limit a new one takes the place of one still in its handshake, or is refused"},
	{"amqp-max-handshakes", "SBGATE_AMQP_MAX_HANDSHAKES", "4096", "AMQP connections that have not completed SASL and open; past it the oldest of them is closed for the new one"},
	{"recheck-interval", "SBGATE_RECHECK_INTERVAL", seconds(store.DefaultRecheck), "longest receivers waiting on an entity with nothing for them go without looking again (a backstop: sends, abandons and timers for scheduled messages and lock ends wake them)"},
	{"shutdown-grace", "SBGATE_SHUTDOWN_GRACE", "30s", "how long shutdown waits for requests in flight"},
	{"body-timeout", "SBGATE_BODY_TIMEOUT", seconds(rest.DefaultBodyTimeout), "how long a request's body may take to arrive (raise it for very large messages over slow links)"},
	{"write-timeout", "SBGATE_WRITE_TIMEOUT", seconds(rest.DefaultWriteTimeout), "how long an answer may take to write, from its first byte (long-poll waits do not count)"},
	{"pprof-listen", "SBGATE_PPROF_LISTEN", "", "address to serve Go's /debug/pprof profiles on (off when empty; keep it private)"},
	{"trusted-proxies", "SBGATE_TRUSTED_PROXIES", "", "comma-separated addresses or CIDRs of reverse proxies whose Forwarded / X-Forwarded-Proto / X-Forwarded-Host " +
		"headers say how clients reached them (for https settlement URLs behind a TLS-terminating proxy); from other peers those headers are user properties"},
	{"config", "SBGATE_CONFIG", "", "the Service Bus emulator's Config.json: its queues, topics, subscriptions and rules are created at start, and updated to match it at every start (see -config-prune)"},
	{"mux-listen", "SBGATE_MUX_LISTEN", "", "address to serve AMQP, AMQPS, HTTP and HTTPS (and AMQP over WebSockets) on one port, told apart by their first bytes, so that one Endpoint=sb://host:port serves the SDKs' data and administration clients alike (TLS needs -tls-cert; off when empty)"},
	{"emulator-http-listen", "SBGATE_EMULATOR_HTTP_LISTEN", "127.0.0.1:" + strconv.Itoa(emulator.HTTPPort), "in emulator mode, the emulator's management and health-check address (GET /health), served like -mux-listen; EMULATOR_HTTP_PORT sets its port, as it does the emulator's"},
	{"ready-file", "SBGATE_READY_FILE", "", "once the broker listens, write {\"endpoint\", \"connection_string\", \"database_url\"} as JSON to this file " +
		"(mode 0600, written whole: a temporary file renamed into place; removed at shutdown), for scripts and sbgate bench to find a broker started on port 0"},
}

// boolFlags are the settings that are on or off: `-emulator` alone turns one on, and its variable
// takes true/false, 1/0.
var boolFlags = []envFlag{
	{"emulator", "SBGATE_EMULATOR", "false", "emulator mode, a drop-in for Microsoft's Service Bus emulator, for development and tests only: the emulator's public key " +
		emulator.Key + " is accepted as " + emulator.KeyName + ", and its management port serves (see -emulator-http-listen)"},
	{"config-prune", "SBGATE_CONFIG_PRUNE", "false", "with -config, delete the queues, topics and subscriptions the file does not name (with their messages); without it they are left alone and logged"},
}

// seconds writes a default duration as the README and -help show it ("120s", not "2m0s").
func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }

func parseServeConfig(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("sbgate serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	vals, bools, errs := declareServeFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	get := func(name string) string { return strings.TrimSpace(*vals[name]) }
	cfg := serveConfig{
		Listen:      get("listen"),
		AMQPListen:  get("amqp-listen"),
		AMQPSListen: get("amqps-listen"),
		DataDir:     get("data-dir"),
		DatabaseURL: get("database-url"),
		SASKeyName:  get("sas-key-name"),
		SASKey:      get("sas-key"),
		TLSCert:     get("tls-cert"),
		TLSKey:      get("tls-key"),
		Namespace:   get("namespace"),
		LogFormat:   get("log-format"),
		PprofListen: get("pprof-listen"),
		ReadyFile:   get("ready-file"),
	}
	if strings.EqualFold(cfg.AMQPListen, "off") {
		cfg.AMQPListen = ""
	}
	if strings.EqualFold(cfg.AMQPSListen, "off") {
		cfg.AMQPSListen = ""
	}
	cfg.ConfigFile, cfg.MuxListen = get("config"), get("mux-listen")
	cfg.Emulator, cfg.ConfigPrune = *bools["emulator"], *bools["config-prune"]
	if cfg.ConfigPrune && cfg.ConfigFile == "" {
		errs = append(errs, errors.New("-config-prune needs -config"))
	}
	errs = append(errs, cfg.emulatorSettings(fs, getenv, get("emulator-http-listen"))...)
	if err := cfg.LogLevel.UnmarshalText([]byte(get("log-level"))); err != nil {
		errs = append(errs, fmt.Errorf("-log-level: %w", err))
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format: want text or json, got %q", cfg.LogFormat))
	}
	errs = append(errs, cfg.limits(get)...)
	proxies, err := parsePrefixes(get("trusted-proxies"))
	if err != nil {
		errs = append(errs, fmt.Errorf("-trusted-proxies: %w", err))
	}
	cfg.TrustedProxies = proxies
	if getenv("GOGC") == "" {
		// A broker's live heap is small and its garbage is per request: collecting a quarter as
		// often costs a few tens of megabytes and saves about a tenth of the gateway's CPU.
		cfg.GCPercent = 400
	}
	if cfg.DataDir == "" && cfg.DatabaseURL == "" {
		dir, err := db.DefaultDataDir(getenv)
		if err != nil {
			errs = append(errs, fmt.Errorf("-data-dir: %w", err))
		}
		cfg.DataDir = dir
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		errs = append(errs, errors.New("-tls-cert and -tls-key must be given together"))
	}
	if cfg.SASKeyName == "" {
		errs = append(errs, errors.New("-sas-key-name must not be empty"))
	}
	return cfg, errors.Join(errs...)
}

// declareServeFlags declares serveFlags and boolFlags on fs, with their variables' values as
// defaults; errs are the boolean variables that are not true or false.
func declareServeFlags(fs *flag.FlagSet, getenv func(string) string) (vals map[string]*string,
	bools map[string]*bool, errs []error) {
	vals = make(map[string]*string, len(serveFlags))
	for _, f := range serveFlags {
		def := f.def
		if v := getenv(f.env); v != "" {
			def = v
		}
		vals[f.name] = fs.String(f.name, def, f.help+" ($"+f.env+")")
	}
	bools = make(map[string]*bool, len(boolFlags))
	for _, f := range boolFlags {
		def := f.def == "true"
		if v := strings.TrimSpace(getenv(f.env)); v != "" {
			var err error
			if def, err = strconv.ParseBool(v); err != nil {
				errs = append(errs, fmt.Errorf("$%s: want true or false, got %q", f.env, v))
			}
		}
		bools[f.name] = fs.Bool(f.name, def, f.help+" ($"+f.env+")")
	}
	return vals, bools, errs
}

// limits reads the settings that are positive durations and counts from get (a flag's value
// by name), and returns those that are not.
func (c *serveConfig) limits(get func(name string) string) []error {
	var errs []error
	durations := map[string]*time.Duration{
		"max-receive-wait": &c.MaxReceiveWait, "recheck-interval": &c.Recheck,
		"shutdown-grace": &c.ShutdownGrace, "body-timeout": &c.BodyTimeout,
		"write-timeout": &c.WriteTimeout,
	}
	for name, dst := range durations {
		d, err := time.ParseDuration(get(name))
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("-%s: want a positive duration such as 30s, got %q", name, get(name)))
		}
		*dst = d
	}
	n, err := strconv.Atoi(get("send-writers"))
	if err != nil || n < 1 {
		errs = append(errs, fmt.Errorf("-send-writers: want a positive number, got %q", get("send-writers")))
	}
	c.SendWriters = n
	counts := map[string]*int{
		"amqp-max-connections": &c.AMQPMaxConnections, "amqp-max-handshakes": &c.AMQPMaxHandshakes,
	}
	for name, dst := range counts {
		n, err := strconv.Atoi(get(name))
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("-%s: want a positive number, got %q", name, get(name)))
		}
		*dst = n
	}
	return errs
}

// emulatorSettings reads what emulator mode changes. The management address's port is
// EMULATOR_HTTP_PORT when set (the emulator container's variable), unless
// -emulator-http-listen itself was given. The emulator's well-known key is public: outside
// emulator mode no key may be it, and inside it the key name is the emulator's.
func (c *serveConfig) emulatorSettings(fs *flag.FlagSet, getenv func(string) string, listen string) []error {
	var errs []error
	if c.SASKey == emulator.Key && !c.Emulator {
		errs = append(errs, fmt.Errorf("-sas-key: %s is the Service Bus emulator's public key (every copy of its connection string has it); "+
			"it is accepted in emulator mode only (-emulator), for development and tests", emulator.Key))
	}
	if !c.Emulator {
		return errs
	}
	if c.SASKey != "" && c.SASKeyName == emulator.KeyName {
		errs = append(errs, fmt.Errorf("-sas-key: in emulator mode %s is the emulator's key %s; give your own key another -sas-key-name", emulator.KeyName, emulator.Key))
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "emulator-http-listen" })
	if port := strings.TrimSpace(getenv("EMULATOR_HTTP_PORT")); port != "" && !given {
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			errs = append(errs, fmt.Errorf("$EMULATOR_HTTP_PORT: want a port number, got %q", port))
		}
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			errs = append(errs, fmt.Errorf("-emulator-http-listen: %w", err))
		}
		listen = net.JoinHostPort(host, port)
	}
	c.EmulatorHTTPListen = listen
	for _, name := range emulator.IgnoredEnv {
		if getenv(name) != "" {
			c.EmulatorIgnored = append(c.EmulatorIgnored, name)
		}
	}
	return errs
}

// parsePrefixes reads a comma-separated list of CIDRs or single addresses (a /32 or /128).
func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("want addresses or CIDRs such as 10.0.0.0/8, got %q", item)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (c serveConfig) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
