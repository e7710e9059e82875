package atom

import (
	"bytes"
	"encoding/xml"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sbgate/sbgate/broker"
)

// Request bodies in the shapes real clients send (protocol.md §4.3, §8). They double as the seed
// corpus of FuzzDecodeProperties.

// azure-sb (npm, xmlbuilder): declaration with standalone="yes", <updated> first, xmlns:i before
// xmlns, properties in its fixed order including the read-only counts.
const azureSBQueueBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><QueueDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT45S</LockDuration><MaxSizeInMegabytes>2048</MaxSizeInMegabytes><RequiresDuplicateDetection>true</RequiresDuplicateDetection><RequiresSession>true</RequiresSession><DefaultMessageTimeToLive>P14D</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration><DuplicateDetectionHistoryTimeWindow>PT20M</DuplicateDetectionHistoryTimeWindow><MaxDeliveryCount>5</MaxDeliveryCount><EnableBatchedOperations>false</EnableBatchedOperations><SizeInBytes>0</SizeInBytes><MessageCount>0</MessageCount><EnablePartitioning>true</EnablePartitioning></QueueDescription></content></entry>`

const azureSBTopicBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?>
<entry xmlns="http://www.w3.org/2005/Atom">
  <updated>2026-11-22T04:25:02.171Z</updated>
  <content type="application/xml">
    <TopicDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">
      <DefaultMessageTimeToLive>PT1H</DefaultMessageTimeToLive>
      <MaxSizeInMegabytes>3072</MaxSizeInMegabytes>
      <RequiresDuplicateDetection>true</RequiresDuplicateDetection>
      <DuplicateDetectionHistoryTimeWindow>PT30S</DuplicateDetectionHistoryTimeWindow>
      <EnableBatchedOperations>false</EnableBatchedOperations>
      <SizeInBytes>0</SizeInBytes>
    </TopicDescription>
  </content>
</entry>`

const azureSBSubscriptionBody = `<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><SubscriptionDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT2M</LockDuration><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>PT10M</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration><DeadLetteringOnFilterEvaluationExceptions>false</DeadLetteringOnFilterEvaluationExceptions><EnableBatchedOperations>true</EnableBatchedOperations><MaxDeliveryCount>3</MaxDeliveryCount><MessageCount>0</MessageCount></SubscriptionDescription></content></entry>`

// @azure/service-bus with no options: an empty, self-closed description.
const jsEmptyQueueBody = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"/></content></entry>`

// @azure/service-bus updateQueue: the full property set in .NET order, EntityAvailabilityStatus
// included, ForwardTo made absolute, an authorization rule with a p5: schema-instance prefix.
const jsUpdateQueueBody = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT1M30S</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow><MaxDeliveryCount>20</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations><AuthorizationRules><AuthorizationRule p5:type="SharedAccessAuthorizationRule" xmlns:p5="http://www.w3.org/2001/XMLSchema-instance"><ClaimType>SharedAccessKey</ClaimType><ClaimValue>None</ClaimValue><Rights><AccessRights>Send</AccessRights><AccessRights>Listen</AccessRights></Rights><KeyName>app</KeyName><PrimaryKey>cHJpbWFyeQ==</PrimaryKey><SecondaryKey>c2Vjb25kYXJ5</SecondaryKey></AuthorizationRule></AuthorizationRules><Status>SendDisabled</Status><ForwardTo>sb://127.0.0.1:8090/q2</ForwardTo><UserMetadata>owner: team-a</UserMetadata><AutoDeleteOnIdle>PT1H</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning><ForwardDeadLetteredMessagesTo>sb://127.0.0.1:8090/dlq-sink</ForwardDeadLetteredMessagesTo><EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress><MaxMessageSizeInKilobytes>256</MaxMessageSizeInKilobytes></QueueDescription></content></entry>`

// @azure/service-bus createSubscription with a default correlation rule (p4: prefix on Filter).
const jsSubscriptionBody = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-11-22T04:25:02.171Z</updated><content type="application/xml"><SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT30S</LockDuration><RequiresSession>true</RequiresSession><DefaultRuleDescription><Filter p4:type="CorrelationFilter" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"><CorrelationId>abc</CorrelationId><Properties><KeyValueOfstringanyType><Key>color</Key><Value p6:type="l28:string" xmlns:l28="http://www.w3.org/2001/XMLSchema" xmlns:p6="http://www.w3.org/2001/XMLSchema-instance">red</Value></KeyValueOfstringanyType></Properties></Filter><Action p4:type="EmptyRuleAction" xmlns:p4="http://www.w3.org/2001/XMLSchema-instance"/><Name>only-red</Name></DefaultRuleDescription><MaxDeliveryCount>7</MaxDeliveryCount><Status>Active</Status><ForwardTo>sb://localhost/orders</ForwardTo><EntityAvailabilityStatus>Available</EntityAvailabilityStatus></SubscriptionDescription></content></entry>`

// azservicebus/admin (Go): no declaration, no xmlns:i, _XMLSchema-instance prefix declared on the
// element, always <AuthorizationRules></AuthorizationRules>, ForwardTo kept relative.
const goQueueBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT5M</LockDuration><MaxSizeInMegabytes>5120</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>PT24H</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration><MaxDeliveryCount>1</MaxDeliveryCount><EnableBatchedOperations>false</EnableBatchedOperations><AuthorizationRules></AuthorizationRules><Status>ReceiveDisabled</Status><ForwardTo>q2</ForwardTo><UserMetadata>  spaced &amp; &lt;kept&gt;  </UserMetadata><AutoDeleteOnIdle>PT5M</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning><EnableExpress>true</EnableExpress><MaxMessageSizeInKilobytes>1024</MaxMessageSizeInKilobytes></QueueDescription></content></entry>`

const goTopicBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><TopicDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><DefaultMessageTimeToLive>P1D</DefaultMessageTimeToLive><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><EnableBatchedOperations>true</EnableBatchedOperations><AuthorizationRules><AuthorizationRule xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="SharedAccessAuthorizationRule"><ClaimType>SharedAccessKey</ClaimType><ClaimValue>None</ClaimValue><Rights><AccessRights>Manage</AccessRights><AccessRights>Send</AccessRights><AccessRights>Listen</AccessRights></Rights><KeyName>admin</KeyName><CreatedTime>2022-03-04T05:06:07.1234567Z</CreatedTime><ModifiedTime>2022-03-04T05:06:08Z</ModifiedTime><PrimaryKey>pk</PrimaryKey><SecondaryKey>sk</SecondaryKey></AuthorizationRule></AuthorizationRules><Status>Active</Status><UserMetadata>topic meta</UserMetadata><SupportOrdering>false</SupportOrdering><AutoDeleteOnIdle>P30D</AutoDeleteOnIdle><EnablePartitioning>true</EnablePartitioning></TopicDescription></content></entry>`

const goSubscriptionBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT1M</LockDuration><RequiresSession>false</RequiresSession><DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DefaultRuleDescription><Filter xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="SqlFilter"><SqlExpression>a = 1</SqlExpression></Filter><Name>$Default</Name></DefaultRuleDescription><MaxDeliveryCount>10</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations><Status>Disabled</Status><ForwardDeadLetteredMessagesTo>dead</ForwardDeadLetteredMessagesTo><AutoDeleteOnIdle>PT10M</AutoDeleteOnIdle></SubscriptionDescription></content></entry>`

// azure-servicebus (Python) update: prefixed Atom, the SB namespace as default on entry, the
// read-only elements of the GET it started from (CountDetails among them), and TimeSpan.MaxValue
// after a float round trip.
const pythonQueueBody = `<?xml version='1.0' encoding='utf-8'?>
<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml"><QueueDescription><LockDuration>PT13S</LockDuration><MaxSizeInMegabytes>4096</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>P10675199DT2H48M5.477539S</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow><MaxDeliveryCount>10</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations><SizeInBytes>126</SizeInBytes><MessageCount>1</MessageCount><IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules /><Status>Active</Status><CreatedAt>2020-07-03T09:24:36.083Z</CreatedAt><UpdatedAt>2020-07-03T09:24:36.943Z</UpdatedAt><AccessedAt>0001-01-01T00:00:00Z</AccessedAt><SupportOrdering>true</SupportOrdering><CountDetails><ns1:ActiveMessageCount xmlns:ns1="http://schemas.microsoft.com/netservices/2011/06/servicebus">1</ns1:ActiveMessageCount><ns1:DeadLetterMessageCount xmlns:ns1="http://schemas.microsoft.com/netservices/2011/06/servicebus">0</ns1:DeadLetterMessageCount><ns1:ScheduledMessageCount xmlns:ns1="http://schemas.microsoft.com/netservices/2011/06/servicebus">0</ns1:ScheduledMessageCount><ns1:TransferMessageCount xmlns:ns1="http://schemas.microsoft.com/netservices/2011/06/servicebus">0</ns1:TransferMessageCount><ns1:TransferDeadLetterMessageCount xmlns:ns1="http://schemas.microsoft.com/netservices/2011/06/servicebus">0</ns1:TransferDeadLetterMessageCount></CountDetails><AutoDeleteOnIdle>P10675199DT2H48M5.477539S</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning><EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress><ForwardTo>sb://ns.servicebus.windows.net/fwd</ForwardTo></QueueDescription></ns0:content></ns0:entry>`

const pythonSubscriptionBody = `<?xml version='1.0' encoding='utf-8'?>
<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml"><SubscriptionDescription><LockDuration>PT1M</LockDuration><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>P10675199DT2H48M5.477539S</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DeadLetteringOnFilterEvaluationExceptions>true</DeadLetteringOnFilterEvaluationExceptions><MessageCount>0</MessageCount><MaxDeliveryCount>10</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations><Status>Active</Status><CreatedAt>2020-07-03T09:24:36.083Z</CreatedAt><UpdatedAt>2020-07-03T09:24:36.943Z</UpdatedAt><AccessedAt>2020-07-03T09:24:36.943Z</AccessedAt><CountDetails><ns1:ActiveMessageCount xmlns:ns1="http://schemas.microsoft.com/netservices/2011/06/servicebus">0</ns1:ActiveMessageCount></CountDetails><ForwardDeadLetteredMessagesTo>sb://ns.servicebus.windows.net/dlq</ForwardDeadLetteredMessagesTo><AutoDeleteOnIdle>P10675199DT2H48M5.477539S</AutoDeleteOnIdle><EntityAvailabilityStatus>Available</EntityAvailabilityStatus></SubscriptionDescription></ns0:content></ns0:entry>`

// .NET ServiceBusAdministrationClient: no declaration, i: declared on the description, a rule
// with i:type, ForwardTo after EnableExpress (accepted by the real service too).
const dotnetQueueBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT1M</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><RequiresSession>false</RequiresSession><DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow><MaxDeliveryCount>10</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations><IsAnonymousAccessible>true</IsAnonymousAccessible><AuthorizationRules><AuthorizationRule i:type="SharedAccessAuthorizationRule"><ClaimType>SharedAccessKey</ClaimType><ClaimValue>None</ClaimValue><Rights><AccessRights>Listen</AccessRights></Rights><CreatedTime>2021-04-21T19:36:18.5Z</CreatedTime><ModifiedTime>2021-04-21T19:36:19Z</ModifiedTime><KeyName>listener</KeyName><PrimaryKey>a2V5MQ==</PrimaryKey><SecondaryKey>a2V5Mg==</SecondaryKey></AuthorizationRule></AuthorizationRules><Status>Active</Status><UserMetadata>dotnet</UserMetadata><SupportOrdering>true</SupportOrdering><AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning><EnableExpress>false</EnableExpress><ForwardTo>sb://contoso.servicebus.windows.net/next</ForwardTo><MaxMessageSizeInKilobytes>2048</MaxMessageSizeInKilobytes></QueueDescription></content></entry>`

const dotnetTopicBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><TopicDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow><EnableBatchedOperations>true</EnableBatchedOperations><FilteringMessagesBeforePublishing>true</FilteringMessagesBeforePublishing><IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules/><Status>Active</Status><ForwardTo i:nil="true"/><SupportOrdering>true</SupportOrdering><AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning><EnableSubscriptionPartitioning>true</EnableSubscriptionPartitioning><EnableExpress>true</EnableExpress><MaxMessageSizeInKilobytes>4096</MaxMessageSizeInKilobytes></TopicDescription></content></entry>`

// clientBodies lists every body above with the kind it is sent for.
var clientBodies = []struct {
	name string
	kind broker.Kind
	body string
}{
	{"azure-sb queue", broker.KindQueue, azureSBQueueBody},
	{"azure-sb topic", broker.KindTopic, azureSBTopicBody},
	{"azure-sb subscription", broker.KindSubscription, azureSBSubscriptionBody},
	{"js empty queue", broker.KindQueue, jsEmptyQueueBody},
	{"js update queue", broker.KindQueue, jsUpdateQueueBody},
	{"js subscription", broker.KindSubscription, jsSubscriptionBody},
	{"go queue", broker.KindQueue, goQueueBody},
	{"go topic", broker.KindTopic, goTopicBody},
	{"go subscription", broker.KindSubscription, goSubscriptionBody},
	{"python queue", broker.KindQueue, pythonQueueBody},
	{"python subscription", broker.KindSubscription, pythonSubscriptionBody},
	{"dotnet queue", broker.KindQueue, dotnetQueueBody},
	{"dotnet topic", broker.KindTopic, dotnetTopicBody},
}

func TestDecodeClientBodies(t *testing.T) {
	defaults := func(k broker.Kind, edit func(p *broker.Properties)) broker.Properties {
		p := broker.DefaultProperties(k)
		edit(&p)
		return p
	}
	want := map[string]broker.Properties{
		"azure-sb queue": defaults(broker.KindQueue, func(p *broker.Properties) {
			p.LockDuration = 45 * time.Second
			p.MaxSizeInMegabytes = 2048
			p.RequiresDuplicateDetection = true
			p.RequiresSession = true
			p.DefaultMessageTimeToLive = 14 * day
			p.DeadLetteringOnMessageExpiration = true
			p.DuplicateDetectionHistoryTimeWindow = 20 * time.Minute
			p.MaxDeliveryCount = 5
			p.EnableBatchedOperations = false
			p.EnablePartitioning = true
		}),
		"azure-sb topic": defaults(broker.KindTopic, func(p *broker.Properties) {
			p.DefaultMessageTimeToLive = time.Hour
			p.MaxSizeInMegabytes = 3072
			p.RequiresDuplicateDetection = true
			p.DuplicateDetectionHistoryTimeWindow = 30 * time.Second
			p.EnableBatchedOperations = false
		}),
		"azure-sb subscription": defaults(broker.KindSubscription, func(p *broker.Properties) {
			p.LockDuration = 2 * time.Minute
			p.DefaultMessageTimeToLive = 10 * time.Minute
			p.DeadLetteringOnMessageExpiration = true
			p.DeadLetteringOnFilterEvaluation = false
			p.MaxDeliveryCount = 3
		}),
		"js empty queue": broker.DefaultProperties(broker.KindQueue),
		"js update queue": defaults(broker.KindQueue, func(p *broker.Properties) {
			p.LockDuration = 90 * time.Second
			p.MaxDeliveryCount = 20
			p.AuthorizationRules = []broker.AuthorizationRule{{
				KeyName: "app", PrimaryKey: "cHJpbWFyeQ==", SecondaryKey: "c2Vjb25kYXJ5", Rights: []string{"Send", "Listen"},
			}}
			p.Status = broker.StatusSendDisabled
			p.ForwardTo, p.ForwardToURL = "q2", "sb://127.0.0.1:8090/q2"
			p.UserMetadata = "owner: team-a"
			p.AutoDeleteOnIdle = time.Hour
			p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURL = "dlq-sink", "sb://127.0.0.1:8090/dlq-sink"
		}),
		"js subscription": defaults(broker.KindSubscription, func(p *broker.Properties) {
			p.LockDuration = 30 * time.Second
			p.RequiresSession = true
			p.MaxDeliveryCount = 7
			p.ForwardTo, p.ForwardToURL = "orders", "sb://localhost/orders"
		}),
		"go queue": defaults(broker.KindQueue, func(p *broker.Properties) {
			p.LockDuration = 5 * time.Minute
			p.MaxSizeInMegabytes = 5120
			p.DefaultMessageTimeToLive = 24 * time.Hour
			p.DeadLetteringOnMessageExpiration = true
			p.MaxDeliveryCount = 1
			p.EnableBatchedOperations = false
			p.Status = broker.StatusReceiveDisabled
			p.ForwardTo = "q2"
			p.UserMetadata = "  spaced & <kept>  "
			p.AutoDeleteOnIdle = 5 * time.Minute
			p.EnableExpress = true
			p.MaxMessageSizeInKilobytes = 1024
		}),
		"go topic": defaults(broker.KindTopic, func(p *broker.Properties) {
			p.DefaultMessageTimeToLive = day
			p.AuthorizationRules = []broker.AuthorizationRule{{
				KeyName: "admin", PrimaryKey: "pk", SecondaryKey: "sk", Rights: []string{"Manage", "Send", "Listen"},
				CreatedTime:  time.Date(2022, 3, 4, 5, 6, 7, 123456700, time.UTC),
				ModifiedTime: time.Date(2022, 3, 4, 5, 6, 8, 0, time.UTC),
			}}
			p.UserMetadata = "topic meta"
			p.SupportOrdering = false
			p.AutoDeleteOnIdle = 30 * day
			p.EnablePartitioning = true
		}),
		"go subscription": defaults(broker.KindSubscription, func(p *broker.Properties) {
			p.Status = broker.StatusDisabled
			p.ForwardDeadLetteredMessagesTo = "dead"
			p.AutoDeleteOnIdle = 10 * time.Minute
		}),
		"python queue": defaults(broker.KindQueue, func(p *broker.Properties) {
			p.LockDuration = 13 * time.Second
			p.MaxSizeInMegabytes = 4096
			p.ForwardTo, p.ForwardToURL = "fwd", "sb://ns.servicebus.windows.net/fwd"
		}),
		"python subscription": defaults(broker.KindSubscription, func(p *broker.Properties) {
			p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURL = "dlq", "sb://ns.servicebus.windows.net/dlq"
		}),
		"dotnet queue": defaults(broker.KindQueue, func(p *broker.Properties) {
			p.IsAnonymousAccessible = true
			p.AuthorizationRules = []broker.AuthorizationRule{{
				KeyName: "listener", PrimaryKey: "a2V5MQ==", SecondaryKey: "a2V5Mg==", Rights: []string{"Listen"},
				CreatedTime:  time.Date(2021, 4, 21, 19, 36, 18, 500000000, time.UTC),
				ModifiedTime: time.Date(2021, 4, 21, 19, 36, 19, 0, time.UTC),
			}}
			p.UserMetadata = "dotnet"
			p.ForwardTo, p.ForwardToURL = "next", "sb://contoso.servicebus.windows.net/next"
			p.MaxMessageSizeInKilobytes = 2048
		}),
		"dotnet topic": defaults(broker.KindTopic, func(p *broker.Properties) {
			p.FilteringMessagesBeforePublishing = true
			p.EnableSubscriptionPartitioning = true
			p.EnableExpress = true
			p.MaxMessageSizeInKilobytes = 4096
		}),
	}
	for _, tt := range clientBodies {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeProperties([]byte(tt.body), tt.kind)
			if err != nil {
				t.Fatalf("DecodeProperties: %v", err)
			}
			w, ok := want[tt.name]
			if !ok {
				t.Fatalf("no expectation for %q", tt.name)
			}
			assertProps(t, got, w)
		})
	}
}

// TestDecodeVariants covers the envelope and value forms one at a time, on a queue unless said.
func TestDecodeVariants(t *testing.T) {
	wrap := func(inner string) string {
		return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
			inner + `</QueueDescription></content></entry>`
	}
	q := func(edit func(p *broker.Properties)) broker.Properties {
		p := broker.DefaultProperties(broker.KindQueue)
		if edit != nil {
			edit(&p)
		}
		return p
	}
	tests := []struct {
		name string
		kind broker.Kind
		body string
		want broker.Properties
	}{
		{"empty body", broker.KindQueue, "", q(nil)},
		{"white space body", broker.KindQueue, " \r\n\t", q(nil)},
		{"declaration only", broker.KindQueue, `<?xml version="1.0" encoding="utf-8"?>`, q(nil)},
		{"entry without content", broker.KindQueue, `<entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-01-01T00:00:00Z</updated></entry>`, q(nil)},
		{"empty content", broker.KindQueue, `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"></content></entry>`, q(nil)},
		{"empty description", broker.KindQueue, wrap(""), q(nil)},
		{"bare description", broker.KindQueue,
			`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT2M</LockDuration></QueueDescription>`,
			q(func(p *broker.Properties) { p.LockDuration = 2 * time.Minute })},
		{"bare self-closed description", broker.KindTopic, `<TopicDescription/>`, broker.DefaultProperties(broker.KindTopic)},
		{"no namespaces at all", broker.KindQueue,
			`<entry><content><QueueDescription><MaxDeliveryCount>4</MaxDeliveryCount></QueueDescription></content></entry>`,
			q(func(p *broker.Properties) { p.MaxDeliveryCount = 4 })},
		{"prefixed description", broker.KindQueue,
			`<a:entry xmlns:a="http://www.w3.org/2005/Atom"><a:content><sb:QueueDescription xmlns:sb="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><sb:RequiresSession>true</sb:RequiresSession></sb:QueueDescription></a:content></a:entry>`,
			q(func(p *broker.Properties) { p.RequiresSession = true })},
		{"comments, DOCTYPE and processing instructions", broker.KindQueue,
			`<?xml version="1.0"?><!DOCTYPE entry><!-- c --><entry xmlns="http://www.w3.org/2005/Atom"><!-- c --><content><?pi x?><QueueDescription><LockDuration>PT<!-- split -->2M</LockDuration></QueueDescription></content></entry><!-- trailing -->` + "\n",
			q(func(p *broker.Properties) { p.LockDuration = 2 * time.Minute })},
		{"unknown elements anywhere", broker.KindQueue,
			`<entry xmlns="http://www.w3.org/2005/Atom"><title>x</title><author><name>n</name></author><content><QueueDescription><Unknown><Deep><Deeper>1</Deeper></Deep></Unknown><MaxDeliveryCount>6</MaxDeliveryCount><SkippedUpdate>false</SkippedUpdate><MessageCountDetails/></QueueDescription></content><Extra/><link rel="self" href="x"/></entry>`,
			q(func(p *broker.Properties) { p.MaxDeliveryCount = 6 })},
		{"elements of other kinds are ignored", broker.KindTopic,
			`<TopicDescription><LockDuration>PT3M</LockDuration><RequiresSession>true</RequiresSession><MaxDeliveryCount>3</MaxDeliveryCount><ForwardTo>x</ForwardTo><DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration></TopicDescription>`,
			broker.DefaultProperties(broker.KindTopic)},
		{"subscription ignores queue-only elements", broker.KindSubscription,
			`<SubscriptionDescription><MaxSizeInMegabytes>2048</MaxSizeInMegabytes><RequiresDuplicateDetection>true</RequiresDuplicateDetection><EnablePartitioning>true</EnablePartitioning><AuthorizationRules><AuthorizationRule><KeyName>k</KeyName></AuthorizationRule></AuthorizationRules></SubscriptionDescription>`,
			broker.DefaultProperties(broker.KindSubscription)},
		{"any order", broker.KindQueue,
			wrap(`<MaxMessageSizeInKilobytes>512</MaxMessageSizeInKilobytes><ForwardTo>z</ForwardTo><LockDuration>PT10S</LockDuration>`),
			q(func(p *broker.Properties) {
				p.MaxMessageSizeInKilobytes = 512
				p.ForwardTo = "z"
				p.LockDuration = 10 * time.Second
			})},
		{"last duplicate wins", broker.KindQueue,
			wrap(`<MaxDeliveryCount>2</MaxDeliveryCount><MaxDeliveryCount>3</MaxDeliveryCount>`),
			q(func(p *broker.Properties) { p.MaxDeliveryCount = 3 })},
		{"booleans in every form", broker.KindQueue,
			wrap(`<RequiresSession>1</RequiresSession><EnableBatchedOperations>0</EnableBatchedOperations><SupportOrdering>FALSE</SupportOrdering><EnableExpress>True</EnableExpress><RequiresDuplicateDetection> true </RequiresDuplicateDetection>`),
			q(func(p *broker.Properties) {
				p.RequiresSession = true
				p.EnableBatchedOperations = false
				p.SupportOrdering = false
				p.EnableExpress = true
				p.RequiresDuplicateDetection = true
			})},
		{"white space around values", broker.KindQueue,
			wrap("<LockDuration>\n  PT30S\n</LockDuration><MaxSizeInMegabytes> 2048 </MaxSizeInMegabytes><Status> Disabled </Status>"),
			q(func(p *broker.Properties) {
				p.LockDuration = 30 * time.Second
				p.MaxSizeInMegabytes = 2048
				p.Status = broker.StatusDisabled
			})},
		{"status case is canonicalised", broker.KindQueue, wrap(`<Status>senddisabled</Status>`),
			q(func(p *broker.Properties) { p.Status = broker.StatusSendDisabled })},
		{"empty and nil elements keep defaults", broker.KindQueue,
			wrap(`<LockDuration></LockDuration><MaxDeliveryCount/><Status/><EnableBatchedOperations> </EnableBatchedOperations><ForwardTo/><MaxSizeInMegabytes i:nil="true">x</MaxSizeInMegabytes><UserMetadata xsi:nil="true" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">m</UserMetadata>`),
			q(nil)},
		{"negative and zero numbers are left to Validate", broker.KindQueue,
			wrap(`<MaxDeliveryCount>-1</MaxDeliveryCount><MaxSizeInMegabytes>0</MaxSizeInMegabytes><LockDuration>PT0S</LockDuration>`),
			q(func(p *broker.Properties) { p.MaxDeliveryCount = -1; p.MaxSizeInMegabytes = 0; p.LockDuration = 0 })},
		{"int32 and int64 limits", broker.KindQueue,
			wrap(`<MaxDeliveryCount>2147483647</MaxDeliveryCount><MaxSizeInMegabytes>9223372036854775807</MaxSizeInMegabytes>`),
			q(func(p *broker.Properties) { p.MaxDeliveryCount = 1<<31 - 1; p.MaxSizeInMegabytes = 1<<63 - 1 })},
		{"user metadata kept verbatim", broker.KindQueue,
			wrap("<UserMetadata><![CDATA[<json>{\"a\": 1}</json>]]> &#xD;\n\ttab é 😀 </UserMetadata>"),
			q(func(p *broker.Properties) { p.UserMetadata = "<json>{\"a\": 1}</json> \r\n\ttab é 😀 " })},
		{"forward targets", broker.KindQueue,
			wrap(`<ForwardTo>SB://Host:5671/Orders/Sub</ForwardTo><ForwardDeadLetteredMessagesTo>https://host/dlq</ForwardDeadLetteredMessagesTo>`),
			q(func(p *broker.Properties) {
				p.ForwardTo, p.ForwardToURL = "Orders/Sub", "SB://Host:5671/Orders/Sub" // kept as written
				p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURL = "dlq", "https://host/dlq"
			})},
		{"forward target over http, relative with slash", broker.KindSubscription,
			`<SubscriptionDescription><ForwardTo> http://127.0.0.1:8080/t/Subscriptions/s </ForwardTo><ForwardDeadLetteredMessagesTo>a/b</ForwardDeadLetteredMessagesTo></SubscriptionDescription>`,
			func() broker.Properties {
				p := broker.DefaultProperties(broker.KindSubscription)
				p.ForwardTo, p.ForwardToURL = "t/Subscriptions/s", "http://127.0.0.1:8080/t/Subscriptions/s"
				p.ForwardDeadLetteredMessagesTo = "a/b" // a name: no URL
				return p
			}()},
		{"rule without type, odd case rights, duplicates", broker.KindQueue,
			wrap(`<AuthorizationRules><SharedAccessAuthorizationRule><Rights><AccessRights>listen</AccessRights><AccessRights>LISTEN</AccessRights><Unknown/><AccessRights> send </AccessRights></Rights><KeyName> k </KeyName><CreatedTime>0001-01-01T00:00:00</CreatedTime><ModifiedTime/></SharedAccessAuthorizationRule><Other/></AuthorizationRules>`),
			q(func(p *broker.Properties) {
				p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "k", Rights: []string{"Listen", "Send"}}}
			})},
		{"rule type with a QName value", broker.KindQueue,
			wrap(`<AuthorizationRules><AuthorizationRule i:type="d2p1:SharedAccessAuthorizationRule" xmlns:d2p1="x"><KeyName>a</KeyName></AuthorizationRule><AuthorizationRule i:type="SharedAccessAuthorizationRule"><KeyName>b</KeyName></AuthorizationRule></AuthorizationRules>`),
			q(func(p *broker.Properties) {
				p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "a"}, {KeyName: "b"}}
			})},
		{"undeclared i prefix on a rule", broker.KindQueue,
			`<QueueDescription><AuthorizationRules><AuthorizationRule i:type="SharedAccessAuthorizationRule"><KeyName>a</KeyName></AuthorizationRule></AuthorizationRules></QueueDescription>`,
			q(func(p *broker.Properties) { p.AuthorizationRules = []broker.AuthorizationRule{{KeyName: "a"}} })},
		{"subscription dead-lettering on filter exceptions", broker.KindSubscription,
			`<SubscriptionDescription><DeadLetteringOnFilterEvaluationExceptions>false</DeadLetteringOnFilterEvaluationExceptions></SubscriptionDescription>`,
			func() broker.Properties {
				p := broker.DefaultProperties(broker.KindSubscription)
				p.DeadLetteringOnFilterEvaluation = false
				return p
			}()},
		{"year and month designators", broker.KindQueue, wrap(`<DefaultMessageTimeToLive>P1Y1M</DefaultMessageTimeToLive>`),
			q(func(p *broker.Properties) { p.DefaultMessageTimeToLive = 395 * day })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeProperties([]byte(tt.body), tt.kind)
			if err != nil {
				t.Fatalf("DecodeProperties(%q): %v", tt.body, err)
			}
			assertProps(t, got, tt.want)
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	wrap := func(inner string) string {
		return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
			inner + `</QueueDescription></content></entry>`
	}
	deep := wrap(strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40))
	tests := []struct {
		name string
		kind broker.Kind
		body string
		// every string must appear in the error message
		mention []string
	}{
		{"truncated", broker.KindQueue, `<entry xmlns="http://www.w3.org/2005/Atom"><content>`, []string{"well-formed"}},
		{"mismatched tags", broker.KindQueue, `<entry><content></entry>`, []string{"well-formed"}},
		{"not XML", broker.KindQueue, `{"LockDuration": "PT1M"}`, []string{"text outside"}},
		{"text after root", broker.KindQueue, `<QueueDescription/>junk`, []string{"text outside"}},
		{"two roots", broker.KindQueue, `<QueueDescription/><QueueDescription/>`, []string{"more than one root"}},
		{"two descriptions", broker.KindQueue, `<entry><content><QueueDescription/><QueueDescription/></content></entry>`, []string{"more than one description"}},
		{"undefined entity", broker.KindQueue, wrap(`<UserMetadata>&nbsp;</UserMetadata>`), []string{"well-formed"}},
		{"control character", broker.KindQueue, wrap("<UserMetadata>\x01</UserMetadata>"), []string{"well-formed"}},
		{"invalid UTF-8", broker.KindQueue, wrap("<UserMetadata>\xff</UserMetadata>"), []string{"well-formed"}},
		{"UTF-16 declaration", broker.KindQueue, `<?xml version="1.0" encoding="utf-16"?><QueueDescription/>`, []string{"well-formed"}},
		{"unknown root", broker.KindQueue, `<feed xmlns="http://www.w3.org/2005/Atom"/>`, []string{"feed", "QueueDescription"}},
		{"topic for a queue", broker.KindQueue, `<entry xmlns="http://www.w3.org/2005/Atom"><content><TopicDescription/></content></entry>`, []string{"TopicDescription", "QueueDescription"}},
		{"bare topic for a queue", broker.KindQueue, `<TopicDescription/>`, []string{"TopicDescription", "QueueDescription"}},
		{"queue for a subscription", broker.KindSubscription, azureSBQueueBody, []string{"QueueDescription", "SubscriptionDescription"}},
		{"subscription for a topic", broker.KindTopic, jsSubscriptionBody, []string{"SubscriptionDescription", "TopicDescription"}},
		{"rule for a subscription", broker.KindSubscription, `<entry><content><RuleDescription/></content></entry>`, []string{"RuleDescription", "SubscriptionDescription"}},
		{"oversized body", broker.KindQueue, wrap(strings.Repeat(" ", maxBodySize)), []string{"larger than"}},
		{"deep nesting in an ignored element", broker.KindQueue, deep, []string{"deeper than 32"}},
		{"deep nesting before the description", broker.KindQueue, strings.Repeat("<entry>", 40), []string{"deeper than 32"}},
		{"element inside a value", broker.KindQueue, wrap(`<LockDuration><Value>PT1M</Value></LockDuration>`), []string{"LockDuration", "Value"}},
		{"read-only status", broker.KindQueue, wrap(`<Status>Creating</Status>`), []string{"Status", "'Creating'"}},
		{"unsupported rule type", broker.KindQueue, wrap(`<AuthorizationRules><AuthorizationRule i:type="AllowRule"/></AuthorizationRules>`), []string{"AllowRule"}},
		{"unknown access right", broker.KindQueue, wrap(`<AuthorizationRules><AuthorizationRule><Rights><AccessRights>Admin</AccessRights></Rights></AuthorizationRule></AuthorizationRules>`), []string{"AccessRights", "'Admin'"}},
		{"bad rule time", broker.KindQueue, wrap(`<AuthorizationRules><AuthorizationRule><CreatedTime>yesterday</CreatedTime></AuthorizationRule></AuthorizationRules>`), []string{"CreatedTime", "'yesterday'"}},
		{"forward target without entity", broker.KindQueue, wrap(`<ForwardTo>sb://host</ForwardTo>`), []string{"ForwardTo", "'sb://host'"}},
		{"forward URL too long to keep", broker.KindQueue, wrap(`<ForwardTo>https://host/` + strings.Repeat("q", 2048) + `</ForwardTo>`), []string{"ForwardTo", "longer than 2048 bytes"}},
		{"forward target root", broker.KindQueue, wrap(`<ForwardDeadLetteredMessagesTo>https://host/ </ForwardDeadLetteredMessagesTo>`), []string{"ForwardDeadLetteredMessagesTo"}},
		{"long value is clipped", broker.KindQueue, wrap(`<LockDuration>` + strings.Repeat("x", 1000) + `</LockDuration>`), []string{"LockDuration", strings.Repeat("x", 64) + "..."}},
	}
	// One bad value for every element each kind reads.
	badValues := map[string][]string{
		"duration": {"T1M", "-PT1M", "PT", "1 minute", "PT1.5M"},
		"bool":     {"yes", "2", "truee", "on"},
		"int64":    {"1.5", "1e3", "0x10", "9223372036854775808", "ten"},
		"int32":    {"2147483648", "-2147483649", "1.0", "many"},
		"status":   {"Unknown", "Restoring", "Enabled"},
	}
	kinds := map[string]struct {
		kind  broker.Kind
		elems map[string]string
	}{
		"QueueDescription": {broker.KindQueue, map[string]string{
			"LockDuration": "duration", "MaxSizeInMegabytes": "int64", "RequiresDuplicateDetection": "bool",
			"RequiresSession": "bool", "DefaultMessageTimeToLive": "duration", "DeadLetteringOnMessageExpiration": "bool",
			"DuplicateDetectionHistoryTimeWindow": "duration", "MaxDeliveryCount": "int32", "EnableBatchedOperations": "bool",
			"IsAnonymousAccessible": "bool", "Status": "status", "SupportOrdering": "bool", "AutoDeleteOnIdle": "duration",
			"EnablePartitioning": "bool", "EnableExpress": "bool", "MaxMessageSizeInKilobytes": "int64",
		}},
		"TopicDescription": {broker.KindTopic, map[string]string{
			"DefaultMessageTimeToLive": "duration", "MaxSizeInMegabytes": "int64", "RequiresDuplicateDetection": "bool",
			"DuplicateDetectionHistoryTimeWindow": "duration", "EnableBatchedOperations": "bool",
			"FilteringMessagesBeforePublishing": "bool", "IsAnonymousAccessible": "bool", "Status": "status",
			"SupportOrdering": "bool", "AutoDeleteOnIdle": "duration", "EnablePartitioning": "bool",
			"EnableSubscriptionPartitioning": "bool", "EnableExpress": "bool", "MaxMessageSizeInKilobytes": "int64",
		}},
		"SubscriptionDescription": {broker.KindSubscription, map[string]string{
			"LockDuration": "duration", "RequiresSession": "bool", "DefaultMessageTimeToLive": "duration",
			"DeadLetteringOnMessageExpiration": "bool", "DeadLetteringOnFilterEvaluationExceptions": "bool",
			"MaxDeliveryCount": "int32", "EnableBatchedOperations": "bool", "Status": "status", "AutoDeleteOnIdle": "duration",
		}},
	}
	for desc, k := range kinds {
		for elem, typ := range k.elems {
			for _, v := range badValues[typ] {
				tests = append(tests, struct {
					name    string
					kind    broker.Kind
					body    string
					mention []string
				}{
					name:    desc + " " + elem + " " + v,
					kind:    k.kind,
					body:    "<" + desc + "><" + elem + ">" + v + "</" + elem + "></" + desc + ">",
					mention: []string{elem, "'" + v + "'"},
				})
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeProperties([]byte(tt.body), tt.kind)
			if err == nil {
				t.Fatalf("DecodeProperties = %+v, nil; want a bad request", got)
			}
			var se *broker.Error
			if !errors.As(err, &se) || se.Code != broker.CodeBadRequest || !errors.Is(err, broker.ErrBadRequest) {
				t.Fatalf("DecodeProperties error = %#v; want a *store.Error with CodeBadRequest", err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(se.Message, m) {
					t.Errorf("error %q does not mention %q", se.Message, m)
				}
			}
			if len(se.Message) > 400 {
				t.Errorf("error message is %d bytes long; want it short", len(se.Message))
			}
		})
	}
}

func TestDecodeUnknownKind(t *testing.T) {
	_, err := DecodeProperties([]byte(`<QueueDescription/>`), broker.Kind(42))
	if err == nil || broker.ErrorCode(err) != broker.CodeInternal {
		t.Fatalf("DecodeProperties(kind 42) error = %v; want a plain (internal) error", err)
	}
}

// TestDefaultRuleSeam shows how the rule codec will plug in: the hook sees the element with the
// document's namespace context, so xsi:type resolves whatever prefix the client used.
func TestDefaultRuleSeam(t *testing.T) {
	for _, tt := range []struct {
		name, body, wantFilter string
	}{
		{"js", jsSubscriptionBody, "CorrelationFilter"},
		{"go", goSubscriptionBody, "SqlFilter"},
		{"azure-sb", `<entry xmlns="http://www.w3.org/2005/Atom"><content><SubscriptionDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>1=1</SqlExpression></Filter></DefaultRuleDescription><MaxDeliveryCount>2</MaxDeliveryCount></SubscriptionDescription></content></entry>`, "SqlFilter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := broker.DefaultProperties(broker.KindSubscription)
			var filter string
			calls := 0
			d := descDecoder{kind: broker.KindSubscription, fields: kindFields[broker.KindSubscription], props: &p,
				onDefaultRule: func(r *reader, start xml.StartElement) error {
					calls++
					if start.Name.Local != "DefaultRuleDescription" {
						t.Errorf("hook called for %s", start.Name.Local)
					}
					for open := 1; open > 0; {
						tok, err := r.next()
						if err != nil {
							return err
						}
						switch t := tok.(type) {
						case xml.StartElement:
							open++
							if t.Name.Local == "Filter" {
								filter, _ = xsiType(t.Attr)
							}
						case xml.EndElement:
							open--
						}
					}
					return nil
				}}
			if err := d.decode([]byte(tt.body)); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if calls != 1 || filter != tt.wantFilter {
				t.Errorf("hook calls = %d, filter type = %q; want 1, %q", calls, filter, tt.wantFilter)
			}
		})
	}
	// Without the hook the rule is skipped and the elements after it still count.
	p, err := DecodeProperties([]byte(jsSubscriptionBody), broker.KindSubscription)
	if err != nil || p.MaxDeliveryCount != 7 {
		t.Fatalf("DecodeProperties = %v, %v; want MaxDeliveryCount 7", p.MaxDeliveryCount, err)
	}
}

// assertProps compares two Properties, times by instant.
func assertProps(t *testing.T, got, want broker.Properties) {
	t.Helper()
	if len(got.AuthorizationRules) != len(want.AuthorizationRules) {
		t.Fatalf("AuthorizationRules = %+v; want %+v", got.AuthorizationRules, want.AuthorizationRules)
	}
	for i := range got.AuthorizationRules {
		g, w := got.AuthorizationRules[i], want.AuthorizationRules[i]
		if !g.CreatedTime.Equal(w.CreatedTime) || !g.ModifiedTime.Equal(w.ModifiedTime) {
			t.Errorf("rule %d times = %v, %v; want %v, %v", i, g.CreatedTime, g.ModifiedTime, w.CreatedTime, w.ModifiedTime)
		}
		g.CreatedTime, g.ModifiedTime, w.CreatedTime, w.ModifiedTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("rule %d = %+v; want %+v", i, g, w)
		}
	}
	got.AuthorizationRules, want.AuthorizationRules = nil, nil
	if !reflect.DeepEqual(got, want) {
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		for i := range gv.NumField() {
			if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
				t.Errorf("%s = %#v; want %#v", gv.Type().Field(i).Name, gv.Field(i).Interface(), wv.Field(i).Interface())
			}
		}
	}
}

func FuzzDecodeProperties(f *testing.F) {
	for _, b := range clientBodies {
		f.Add([]byte(b.body))
	}
	for _, s := range []string{"", "<QueueDescription/>", "<entry><content><TopicDescription/></content></entry>",
		`<SubscriptionDescription><ForwardTo>sb://h/x</ForwardTo></SubscriptionDescription>`} {
		f.Add([]byte(s))
	}
	opts := EncodeOptions{Runtime: true, Host: "gw:5300"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, k := range []broker.Kind{broker.KindQueue, broker.KindTopic, broker.KindSubscription} {
			p, err := DecodeProperties(body, k)
			if err != nil {
				var se *broker.Error
				if !errors.As(err, &se) || se.Code != broker.CodeBadRequest {
					t.Fatalf("DecodeProperties(%q, %v) error = %#v; want a bad request", body, k, err)
				}
				continue
			}
			// Whatever was accepted must be written back as well-formed XML that decodes to the
			// same properties: a GET after a PUT must show what was stored.
			e := broker.Entity{Kind: k, Props: p}
			out := AppendEntry(nil, EntryInfo{ID: "https://gw:5300/x", Title: "x"}, &e, opts)
			if err := wellFormed(out); err != nil {
				t.Fatalf("AppendEntry output is not well-formed (%v):\n%s", err, out)
			}
			back, err := DecodeProperties(out, k)
			if err != nil {
				t.Fatalf("DecodeProperties(AppendEntry(...)) = %v\n%s", err, out)
			}
			// A partitioned entity is written with its total size (store.UpdateEntity maps an
			// echoed total back to the size per partition).
			if k != broker.KindSubscription {
				p.MaxSizeInMegabytes = p.TotalMaxSizeInMegabytes()
			}
			assertProps(t, back, echoed(p, opts.Host))
		}
	})
}

// wellFormed parses b to the end with encoding/xml and checks it has exactly one root element.
func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	roots, depth := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" && roots == 1 && depth == 0 {
				return nil
			}
			if err.Error() == "EOF" {
				return errors.New("not exactly one root element")
			}
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return errors.New("text outside the root element")
			}
		case xml.ProcInst:
			return errors.New("unexpected processing instruction or XML declaration")
		}
	}
}
