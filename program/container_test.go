package program

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbgate/sbgate/emulator"
	"github.com/sbgate/sbgate/internal/eventually"
	"github.com/sbgate/sbgate/sas"
)

// dockerStage is what a Dockerfile stage says about how its image runs.
type dockerStage struct {
	env        map[string]string
	entrypoint []string
	cmd        []string
	copies     map[string]string // destination → source (build-context files only)
	volumes    []string
}

// readDockerStage reads the stage named name of the Dockerfile at path: its ENV, ENTRYPOINT,
// CMD, COPY (from the build context) and VOLUME instructions, continuation lines joined.
func readDockerStage(t *testing.T, path, name string) dockerStage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") && cur.Len() == 0 {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	st := dockerStage{env: map[string]string{}, copies: map[string]string{}}
	in := false
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		instr, rest := strings.ToUpper(fields[0]), strings.TrimSpace(line[len(fields[0]):])
		if instr == "FROM" {
			in = len(fields) >= 4 && strings.EqualFold(fields[2], "AS") && fields[3] == name
			continue
		}
		if !in {
			continue
		}
		switch instr {
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %q: want KEY=value", kv)
				}
				st.env[k] = v
			}
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(rest), &list); err != nil {
				t.Fatalf("Dockerfile: %s %s: want the exec (JSON) form: %v", instr, rest, err)
			}
			if instr == "ENTRYPOINT" {
				st.entrypoint = list
			} else {
				st.cmd = list
			}
		case "COPY":
			if len(fields) == 3 {
				st.copies[fields[2]] = fields[1]
			}
		case "VOLUME":
			st.volumes = append(st.volumes, strings.Fields(rest)...)
		}
	}
	if st.entrypoint == nil {
		t.Fatalf("Dockerfile has no stage %q with an ENTRYPOINT", name)
	}
	return st
}

// imageProcess runs this test binary as the image's entrypoint: its arguments, its ENV with
// the paths given in paths swapped for test directories, and the variables of the emulator's
// container in extra.
func imageProcess(t *testing.T, st dockerStage, env map[string]string, out io.Writer) (*exec.Cmd, <-chan error) {
	t.Helper()
	if st.entrypoint[0] != "sbgate" {
		t.Fatalf("ENTRYPOINT %q does not run sbgate", st.entrypoint)
	}
	cmd := exec.Command(os.Args[0], append(st.entrypoint[1:], st.cmd...)...)
	cmd.Env = []string{"SBGATE_TEST_AS_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, done
}

// TestEmulatorContainerContract runs the Dockerfile's emulator stage as Docker would (its
// ENTRYPOINT, its ENV, the emulator container's variables, Config.json where the emulator reads
// it, data in its volume) on the emulator's own ports, and uses it with the emulator's
// connection string verbatim: Endpoint=sb://localhost, no port, means 5672.
func TestEmulatorContainerContract(t *testing.T) {
	if !onFixedPorts(t, emulator.AMQPPort, emulator.HTTPPort, 5400, 8080) {
		return
	}
	st := readDockerStage(t, "../Dockerfile", "emulator")
	// The image's paths, swapped for directories of this test: Config.json is where the
	// emulator's container reads it, holding the sample the image ships; the data is in the volume.
	if st.env["SBGATE_CONFIG"] != emulator.ConfigPath || st.copies[emulator.ConfigPath] != "nsconfig/testdata/emulator/Config.json" {
		t.Fatalf("the image must read %s and ship the emulator's sample there: ENV %q, COPY %q", emulator.ConfigPath, st.env["SBGATE_CONFIG"], st.copies)
	}
	dataDir := st.env["SBGATE_DATA_DIR"]
	if len(st.volumes) != 1 || st.volumes[0] != dataDir {
		t.Fatalf("the image must keep SBGATE_DATA_DIR %q in its VOLUME, got %q", dataDir, st.volumes)
	}
	if st.env["SBGATE_EMULATOR"] != "true" || st.env["SBGATE_AMQP_LISTEN"] != "0.0.0.0:5672" || st.env["SBGATE_EMULATOR_HTTP_LISTEN"] != "0.0.0.0:5300" {
		t.Fatalf("the image must serve emulator mode on 5672 and 5300 of every interface: %v", st.env)
	}
	configDir := filepath.Join(tempDataDir(t), "ServiceBus_Emulator", "ConfigFiles")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile(filepath.Join("..", st.copies[emulator.ConfigPath]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir, "Config.json"), sample, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		// As Testcontainers and the emulator's compose files set them.
		"ACCEPT_EULA": "Y", "SQL_SERVER": "sqledge", "MSSQL_SA_PASSWORD": "Str0ng-Passw0rd!", "SQL_WAIT_INTERVAL": "0",
	}
	for k, v := range st.env {
		env[k] = v
	}
	env["SBGATE_CONFIG"] = filepath.Join(configDir, "Config.json")
	volume := tempDataDir(t)
	// As root the embedded server runs as postgres, which must reach the volume.
	if err := os.Chmod(volume, 0o711); err != nil {
		t.Fatal(err)
	}
	env["SBGATE_DATA_DIR"] = filepath.Join(volume, "volume")

	start := func(extra map[string]string) (*exec.Cmd, <-chan error, *syncBuffer) {
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		for k, v := range extra {
			e[k] = v
		}
		out := &syncBuffer{}
		cmd, done := imageProcess(t, st, e, out)
		eventually.Within(3*time.Minute).NoError(t, emulator.ReadyLine, func() error {
			select {
			case err := <-done:
				t.Fatalf("the entrypoint exited before it was ready: %v\n%s", err, out)
			default:
			}
			if !strings.Contains(out.String(), emulator.ReadyLine) {
				return outputSoFar{out}
			}
			return nil
		})
		return cmd, done, out
	}
	stop := func(cmd *exec.Cmd, done <-chan error) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the entrypoint exited with %v on SIGTERM", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the entrypoint did not stop within a minute of SIGTERM")
		}
	}
	const verbatim = "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"

	cmd, done, out := start(nil)
	for _, want := range []string{"variable=ACCEPT_EULA", "variable=MSSQL_SA_PASSWORD", "emulator mode: for development and tests only", `connection_string="` + verbatim + `"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the container's log lacks %q:\n%s", want, out)
		}
	}
	client, err := azservicebus.NewClientFromConnectionString(verbatim, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, "queue.1", "through 5672")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sender, err := client.NewSender("queue.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("kept in the volume")}, nil); err != nil {
		t.Fatal(err)
	}
	_ = sender.Close(ctx)
	_ = client.Close(ctx)
	checkManagement(t, "localhost:5300")
	stop(cmd, done)

	// EMULATOR_HTTP_PORT moves the management port, as it does the emulator's; the message sent
	// before the restart is still there.
	cmd, done, _ = start(map[string]string{"EMULATOR_HTTP_PORT": "5400"})
	checkManagement(t, "localhost:5400")
	if _, err := http.Get("http://localhost:5300/health"); err == nil {
		t.Error("with EMULATOR_HTTP_PORT=5400, 5300 still answers")
	}
	client, err = azservicebus.NewClientFromConnectionString(verbatim, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	r, err := client.NewReceiverForQueue("queue.1", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "kept in the volume" {
		t.Fatalf("after a restart: %d messages, %v; want the one sent before it", len(msgs), err)
	}
	stop(cmd, done)
}

// checkManagement asks the emulator's management port what the Testcontainers modules and the
// .NET administration client (http, the Endpoint's port) ask it.
func checkManagement(t *testing.T, hostPort string) {
	t.Helper()
	resp, err := http.Get("http://" + hostPort + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"healthy"`) {
		t.Errorf("GET http://%s/health = %d %s", hostPort, resp.StatusCode, body)
	}
	url := "http://" + hostPort + "/queue.1?api-version=2021-05&enrich=false"
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", sas.Sign("http://"+hostPort+"/queue.1", emulator.KeyName, emulator.Key, time.Now().Add(time.Hour)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<MaxDeliveryCount>3</MaxDeliveryCount>") {
		t.Errorf("GET %s = %d %s; want queue.1 as the sample declares it", url, resp.StatusCode, body)
	}
}
