package compat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// TestGoAdministrationClient drives sbgate's management API with the Go SDK's admin.Client
// (azservicebus v1.11.0), which speaks https only and parses every description strictly: the
// test serves sbgate with TLS and gives the client a transport that trusts the test certificate.
func TestGoAdministrationClient(t *testing.T) {
	t.Parallel()
	srv := newServer(t, httptest.NewTLSServer)
	host := strings.TrimPrefix(srv.URL, "https://")
	conn := "Endpoint=sb://" + host + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + key
	c, err := admin.NewClientFromConnectionString(conn, &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: srv.Client()},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	q, err := c.CreateQueue(ctx, "go-queue", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		LockDuration:     to.Ptr("PT45S"),
		MaxDeliveryCount: to.Ptr[int32](7),
		RequiresSession:  to.Ptr(true),
	}})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	if *q.LockDuration != "PT45S" || *q.MaxDeliveryCount != 7 || !*q.RequiresSession {
		t.Errorf("created queue = %+v", q.QueueProperties)
	}
	got, err := c.GetQueue(ctx, "go-queue", nil)
	if err != nil || got == nil {
		t.Fatalf("GetQueue = %v, %v", got, err)
	}
	got.MaxDeliveryCount = to.Ptr[int32](9)
	upd, err := c.UpdateQueue(ctx, "go-queue", got.QueueProperties, nil)
	if err != nil || *upd.MaxDeliveryCount != 9 {
		t.Fatalf("UpdateQueue = %v, %v", upd, err)
	}
	rt, err := c.GetQueueRuntimeProperties(ctx, "go-queue", nil)
	if err != nil || rt.TotalMessageCount != 0 {
		t.Fatalf("GetQueueRuntimeProperties = %+v, %v", rt, err)
	}
	missing, err := c.GetQueue(ctx, "no-such-queue", nil)
	if err != nil || missing != nil {
		t.Errorf("GetQueue of a missing queue = %v, %v; want nil, nil", missing, err)
	}
	var names []string
	pager := c.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 1})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListQueues: %v", err)
		}
		for _, item := range page.Queues {
			names = append(names, item.QueueName)
		}
	}
	if len(names) != 1 || names[0] != "go-queue" {
		t.Errorf("ListQueues = %q", names)
	}

	if _, err := c.CreateTopic(ctx, "go-topic", nil); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := c.CreateSubscription(ctx, "go-topic", "all", nil); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	if _, err := c.CreateSubscription(ctx, "go-topic", "eu", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		DefaultRule: &admin.RuleProperties{Name: "region", Filter: &admin.SQLFilter{Expression: "region = @r", Parameters: map[string]any{"@r": "eu"}}},
	}}); err != nil {
		t.Fatalf("CreateSubscription with a default rule: %v", err)
	}
	if _, err := c.GetSubscriptionRuntimeProperties(ctx, "go-topic", "eu", nil); err != nil {
		t.Fatalf("GetSubscriptionRuntimeProperties: %v", err)
	}
	rule, err := c.GetRule(ctx, "go-topic", "eu", "region", nil)
	if err != nil {
		t.Fatalf("GetRule: %v", err)
	}
	if f, ok := rule.Filter.(*admin.SQLFilter); !ok || f.Expression != "region = @r" || f.Parameters["@r"] != "eu" {
		t.Errorf("rule filter = %#v", rule.Filter)
	}
	if _, err := c.CreateRule(ctx, "go-topic", "all", &admin.CreateRuleOptions{
		Name:   to.Ptr("urgent"),
		Filter: &admin.CorrelationFilter{CorrelationID: to.Ptr("c1"), ApplicationProperties: map[string]any{"prio": 1}},
		Action: &admin.SQLAction{Expression: "SET sys.Label = 'urgent'"},
	}); err != nil {
		t.Fatalf("CreateRule: %v", err)
	}
	// Every value type the SDK writes reads back in that type: it declares every integer int,
	// one beyond 32 bits too, and reads ints as int64.
	at := time.Date(2024, 1, 2, 3, 4, 5, 678000000, time.UTC)
	params := map[string]any{"@n": 5, "@big": int64(5000000000), "@f": 1.5, "@s": "x", "@b": true, "@t": at}
	if _, err := c.CreateRule(ctx, "go-topic", "all", &admin.CreateRuleOptions{
		Name:   to.Ptr("typed"),
		Filter: &admin.SQLFilter{Expression: "n = @n AND big = @big AND f = @f AND s = @s AND b = @b AND t = @t", Parameters: params},
		Action: &admin.SQLAction{Expression: "SET m = @m", Parameters: map[string]any{"@m": int64(-6000000000)}},
	}); err != nil {
		t.Fatalf("CreateRule with typed parameters: %v", err)
	}
	if _, err := c.CreateRule(ctx, "go-topic", "all", &admin.CreateRuleOptions{
		Name:   to.Ptr("typed-corr"),
		Filter: &admin.CorrelationFilter{ApplicationProperties: map[string]any{"big": int64(5000000000), "f": 0.25, "at": at}},
	}); err != nil {
		t.Fatalf("CreateRule with typed properties: %v", err)
	}
	typed, err := c.GetRule(ctx, "go-topic", "all", "typed", nil)
	if err != nil {
		t.Fatalf("GetRule typed: %v", err)
	}
	wantParams := map[string]any{"@n": int64(5), "@big": int64(5000000000), "@f": 1.5, "@s": "x", "@b": true, "@t": at}
	if f, ok := typed.Filter.(*admin.SQLFilter); !ok || fmt.Sprintf("%#v", f.Parameters) != fmt.Sprintf("%#v", wantParams) {
		t.Errorf("typed filter = %#v; want parameters %#v", typed.Filter, wantParams)
	}
	if a, ok := typed.Action.(*admin.SQLAction); !ok || a.Parameters["@m"] != int64(-6000000000) {
		t.Errorf("typed action = %#v", typed.Action)
	}
	typedCorr, err := c.GetRule(ctx, "go-topic", "all", "typed-corr", nil)
	if err != nil {
		t.Fatalf("GetRule typed-corr: %v", err)
	}
	wantProps := map[string]any{"big": int64(5000000000), "f": 0.25, "at": at}
	if f, ok := typedCorr.Filter.(*admin.CorrelationFilter); !ok || fmt.Sprintf("%#v", f.ApplicationProperties) != fmt.Sprintf("%#v", wantProps) {
		t.Errorf("typed correlation filter = %#v; want properties %#v", typedCorr.Filter, wantProps)
	}
	for _, name := range []string{"typed", "typed-corr"} {
		if _, err := c.DeleteRule(ctx, "go-topic", "all", name, nil); err != nil {
			t.Fatalf("DeleteRule %s: %v", name, err)
		}
	}
	// Without a name the SDK PUTs to the Rules collection with <Name>$Default</Name>.
	if _, err := c.DeleteRule(ctx, "go-topic", "all", "$Default", nil); err != nil {
		t.Fatalf("DeleteRule: %v", err)
	}
	if _, err := c.CreateRule(ctx, "go-topic", "all", &admin.CreateRuleOptions{}); err != nil {
		t.Fatalf("CreateRule without a name: %v", err)
	}
	var rules []string
	rp := c.NewListRulesPager("go-topic", "all", nil)
	for rp.More() {
		page, err := rp.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListRules: %v", err)
		}
		for _, r := range page.Rules {
			rules = append(rules, r.Name)
		}
	}
	if strings.Join(rules, ",") != "$Default,urgent" {
		t.Errorf("rules = %q", rules)
	}
	if _, err := c.DeleteTopic(ctx, "go-topic", nil); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, err := c.DeleteQueue(ctx, "go-queue", nil); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	_, err = c.DeleteQueue(ctx, "go-queue", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		t.Errorf("second DeleteQueue: err = %v; want a 404 ResponseError", err)
	}
}

// goAdminPackage is the Azure SDK for Go's administration client package; its own live tests run
// against sbgate in TestGoSDKAdminSuite.
const goAdminPackage = "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

// TestGoSDKAdminSuite runs the tests of the Go SDK's admin package, unmodified, against sbgate
// over TLS, and requires every one that can run here to pass. The suite's live tests build
// clients with DefaultAzureCredential and SERVICEBUS_ENDPOINT: AZURE_TOKEN_CREDENTIALS limits the
// credential chain to the Azure CLI, and an `az` stand-in on PATH answers with a SAS token, which
// the admin client sends verbatim; SSL_CERT_FILE makes Go trust the test certificate.
func TestGoSDKAdminSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Go SDK's admin tests")
	}
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not found: %v", err)
	}
	srv := newServer(t, httptest.NewTLSServer)
	host := strings.TrimPrefix(srv.URL, "https://")
	dir := t.TempDir()
	ca := writeCertPEM(t, srv.Certificate().Raw)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-json", "-skip", strings.Join(goAdminSkipped, "|"), goAdminPackage)
	cmd.Env = goSDKLiveEnv(t, dir, host, ca)
	out, _ := cmd.Output()
	results := map[string]string{}
	outputs := map[string]*strings.Builder{}
	for _, line := range strings.Split(string(out), "\n") {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Test == "" {
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		switch {
		case ev.Action == "output":
			if outputs[top] == nil {
				outputs[top] = &strings.Builder{}
			}
			outputs[top].WriteString(ev.Output)
		case !sub && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			results[top] = ev.Action
		}
	}
	if len(results) == 0 {
		t.Fatalf("go test %s ran no test:\n%s", goAdminPackage, out)
	}
	var passed int
	for name, res := range results {
		switch res {
		case "pass":
			passed++
		case "fail":
			t.Errorf("%s failed against sbgate:\n%s", name, outputs[name])
		case "skip":
			t.Errorf("%s skipped: %s", name, outputs[name])
		}
	}
	t.Logf("%d of %d tests of %s passed (%d left out: %s)", passed, len(results), goAdminPackage, len(goAdminSkipped), strings.Join(goAdminSkipped, ", "))
}

// goAdminSkipped are the tests of the Go SDK's admin package that cannot run against sbgate, each
// for a reason the README gives.
var goAdminSkipped = []string{}
