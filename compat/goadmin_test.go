package compat_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
