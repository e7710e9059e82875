package program

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/sbgate/sbgate/sas"
)

// readyInfo is what -ready-file holds: how to reach a broker that was started on port 0, and the
// database it keeps its messages in (sbgate bench measures that database on its own, and starts
// further gateways on it).
type readyInfo struct {
	Endpoint         string `json:"endpoint"`
	ConnectionString string `json:"connection_string"`
	// AMQPConnectionString is the plain AMQP listener's, as the SDKs take it; none when off.
	AMQPConnectionString string `json:"amqp_connection_string,omitempty"`
	DatabaseURL          string `json:"database_url"`
}

// writeReadyFile writes the ready file at path whole: to a temporary file in the same directory,
// synced and renamed into place, so a reader polling for it never sees half of it. The file
// holds the namespace key and maybe a database password, hence mode 0600.
func writeReadyFile(path, scheme, addr, amqpAddr string, key sas.Key, databaseURL string) error {
	hostPort := publicHostPort(addr)
	info := readyInfo{
		Endpoint:         scheme + "://" + hostPort + "/",
		ConnectionString: connectionString(hostPort, key),
		DatabaseURL:      databaseURL,
	}
	if amqpAddr != "" {
		info.AMQPConnectionString = "Endpoint=sb://" + publicHostPort(amqpAddr) + ";SharedAccessKeyName=" + key.Name +
			";SharedAccessKey=" + key.Primary + ";UseDevelopmentEmulator=true"
	}
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// publicHostPort is the address clients use for a listener's address: a wildcard host becomes
// localhost.
func publicHostPort(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
