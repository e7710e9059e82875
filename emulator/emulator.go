// Package emulator holds what lets sbgate stand in for Microsoft's Service Bus emulator
// (mcr.microsoft.com/azure-messaging/servicebus-emulator) in emulator mode (sbgate serve
// -emulator): the connection string everyone copies verbatim and its well-known key, the
// container's paths and environment, its health endpoint and its readiness line, which .NET
// Aspire, the Testcontainers modules and compose files wait for.
package emulator

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
)

// The emulator's well-known credentials: every copy of its connection string carries them, so
// they guard nothing. sbgate accepts them in emulator mode only.
const (
	KeyName = "RootManageSharedAccessKey"
	Key     = "SAS_KEY_VALUE"
)

// ConnectionString is the emulator's connection string, as its documentation gives it, for
// host (and port, when it is not 5672, the one the SDKs dial when the Endpoint names none).
func ConnectionString(host string, port int) string {
	ep := host
	if port != 0 && port != AMQPPort {
		ep = net.JoinHostPort(host, strconv.Itoa(port))
	}
	return "Endpoint=sb://" + ep + ";SharedAccessKeyName=" + KeyName + ";SharedAccessKey=" + Key + ";UseDevelopmentEmulator=true;"
}

// Ports and paths of the emulator's container.
const (
	// AMQPPort is where the emulator serves AMQP, and where the SDKs go for an emulator
	// connection string whose Endpoint names no port.
	AMQPPort = 5672
	// HTTPPort is the emulator's management and health-check port, unless EMULATOR_HTTP_PORT
	// says otherwise.
	HTTPPort = 5300
	// ConfigPath is where the emulator's container reads its Config.json.
	ConfigPath = "/ServiceBus_Emulator/ConfigFiles/Config.json"
)

// ReadyLine is what the emulator logs once it serves; the Testcontainers modules for Java and
// Python, and many compose files, wait for exactly this text.
const ReadyLine = "Emulator Service is Successfully Up!"

// IgnoredEnv are the emulator container's variables that mean nothing to sbgate (it keeps its
// data in PostgreSQL, not SQL Server, and has no licence to accept): they are accepted, so that
// a compose file or Testcontainers setup runs unchanged, and logged as ignored.
var IgnoredEnv = []string{"ACCEPT_EULA", "SQL_SERVER", "MSSQL_SA_PASSWORD", "SQL_WAIT_INTERVAL"}

// HealthPath is the emulator's health check, on its management port.
const HealthPath = "/health"

// health is the body of the emulator's health answers.
type health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Health serves the emulator's health check in front of next: GET or HEAD /health without a
// query answers 200 {"status":"healthy",…} when ready returns nil and 503 {"status":"unhealthy",…}
// otherwise, as the emulator does. Anything else goes to next, so a queue named "health" is
// still reachable with the query every administration client sends (?api-version=…).
func Health(next http.Handler, ready func(r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != HealthPath || r.URL.RawQuery != "" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		status, body := http.StatusOK, health{"healthy", "Service is healthy."}
		if err := ready(r); err != nil {
			status, body = http.StatusServiceUnavailable, health{"unhealthy", "Service not available. Please try after some time."}
		}
		b, _ := json.Marshal(body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	})
}
