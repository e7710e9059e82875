package atom

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sbgate/sbgate/broker"
)

// Content types of management responses. Clients pick their body parser from Content-Type
// (azure-sb parses anything without "xml" as JSON), so these must be sent exactly.
const (
	EntryContentType = "application/atom+xml;type=entry;charset=utf-8"
	FeedContentType  = "application/atom+xml;type=feed;charset=utf-8"
	ErrorContentType = "application/xml; charset=utf-8"
)

// XML namespaces of the management API.
const (
	nsAtom   = "http://www.w3.org/2005/Atom"
	nsSB     = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	nsXSI    = "http://www.w3.org/2001/XMLSchema-instance"
	nsCounts = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
)

// EntryInfo is the Atom envelope of one entity.
type EntryInfo struct {
	// ID is the absolute request URL as received, path casing echoed, e.g.
	// "https://host:8080/orders?api-version=2021-05". JS and azure-sb take entity names only from
	// it, matching "/Subscriptions/" case-sensitively.
	ID string
	// Title is the entity name: the queue or topic path, or the subscription name. Go and .NET
	// take names only from it.
	Title     string
	Published time.Time // written at second precision
	Updated   time.Time // written at second precision
	// Author is the namespace name; <author> is written only when it is non-empty, because the
	// service writes it for queues and topics only.
	Author   string
	SelfHref string // href of <link rel="self">; the link is omitted when empty
	// XMLBase, when non-empty, becomes the xml:base attribute of <entry>, as the service writes
	// it for entries inside a feed.
	XMLBase string
}

// EncodeOptions says which variant of a description to write.
type EncodeOptions struct {
	// Runtime includes the elements the service writes only on GET and list: AccessedAt (queues
	// and topics; subscriptions always carry it), CountDetails and a topic's SubscriptionCount.
	// MessageCount and SizeInBytes are written either way.
	Runtime bool
	// Host is "host:port". When set, ForwardTo and ForwardDeadLetteredMessagesTo set by name are
	// written as sb://Host/path, as the service does; when empty, as stored (relative). Those set
	// as a URL are written as set either way.
	Host string
	// SubscriptionCount is a topic's number of subscriptions, written as <SubscriptionCount>
	// when Runtime is set (broker.Entity does not carry it, so the caller counts). Queues and
	// subscriptions ignore it.
	SubscriptionCount int
	// FilterCounts writes a topic's SqlFilterCount and CorrelationFilterCount (with Runtime), as
	// the service does from api-version 2024-05 on.
	FilterCounts                           bool
	SQLFilterCount, CorrelationFilterCount int64
}

// AppendEntry appends the Atom entry for e (no XML declaration) to dst and returns the extended
// buffer. The description lists every element in the order the service writes it (protocol.md
// §4.5–4.7), because the JS client throws on missing elements and the .NET DataContract
// serializer on the other side of some proxies is order-sensitive. An entity of unknown kind
// gets an empty <content>. It cannot fail.
func AppendEntry(dst []byte, info EntryInfo, e *broker.Entity, opts EncodeOptions) []byte {
	dst = appendEntryOpen(dst, info)
	switch e.Kind {
	case broker.KindQueue:
		dst = appendQueue(dst, e, opts)
	case broker.KindTopic:
		dst = appendTopic(dst, e, opts)
	case broker.KindSubscription:
		dst = appendSubscription(dst, e, opts)
	}
	return append(dst, "</content></entry>"...)
}

// appendEntryOpen writes an entry's envelope up to and including the <content> start tag.
func appendEntryOpen(dst []byte, info EntryInfo) []byte {
	dst = append(dst, `<entry xmlns="`+nsAtom+`"`...)
	if info.XMLBase != "" {
		dst = append(dst, ` xml:base="`...)
		dst = appendEscaped(dst, info.XMLBase, true)
		dst = append(dst, '"')
	}
	dst = append(dst, "><id>"...)
	dst = appendEscaped(dst, info.ID, false)
	dst = append(dst, `</id><title type="text">`...)
	dst = appendEscaped(dst, info.Title, false)
	dst = append(dst, "</title><published>"...)
	dst = info.Published.UTC().AppendFormat(dst, atomTimeLayout)
	dst = append(dst, "</published><updated>"...)
	dst = info.Updated.UTC().AppendFormat(dst, atomTimeLayout)
	dst = append(dst, "</updated>"...)
	if info.Author != "" {
		dst = append(dst, "<author><name>"...)
		dst = appendEscaped(dst, info.Author, false)
		dst = append(dst, "</name></author>"...)
	}
	if info.SelfHref != "" {
		dst = append(dst, `<link rel="self" href="`...)
		dst = appendEscaped(dst, info.SelfHref, true)
		dst = append(dst, `"/>`...)
	}
	return append(dst, `<content type="application/xml">`...)
}

const descAttrs = ` xmlns="` + nsSB + `" xmlns:i="` + nsXSI + `">`

// appendQueue writes QueueDescription in the order of protocol.md §4.5 "Response element order".
func appendQueue(dst []byte, e *broker.Entity, opts EncodeOptions) []byte {
	p := &e.Props
	dst = append(dst, "<QueueDescription"+descAttrs...)
	dst = appendDurationElem(dst, "LockDuration", p.LockDuration)
	dst = appendIntElem(dst, "MaxSizeInMegabytes", p.TotalMaxSizeInMegabytes())
	dst = appendBoolElem(dst, "RequiresDuplicateDetection", p.RequiresDuplicateDetection)
	dst = appendBoolElem(dst, "RequiresSession", p.RequiresSession)
	dst = appendDurationElem(dst, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	dst = appendBoolElem(dst, "DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	dst = appendDurationElem(dst, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
	dst = appendIntElem(dst, "MaxDeliveryCount", int64(p.MaxDeliveryCount))
	dst = appendBoolElem(dst, "EnableBatchedOperations", p.EnableBatchedOperations)
	dst = appendIntElem(dst, "SizeInBytes", e.Counts.SizeInBytes)
	dst = appendIntElem(dst, "MessageCount", e.Counts.Total())
	dst = appendBoolElem(dst, "IsAnonymousAccessible", p.IsAnonymousAccessible)
	dst = appendAuthorizationRules(dst, p.AuthorizationRules)
	dst = appendTextElem(dst, "Status", string(p.Status))
	dst = appendOptionalElem(dst, "UserMetadata", p.UserMetadata)
	dst = appendTimeElem(dst, "CreatedAt", e.CreatedAt)
	dst = appendTimeElem(dst, "UpdatedAt", e.UpdatedAt)
	if opts.Runtime {
		dst = appendTimeElem(dst, "AccessedAt", e.AccessedAt)
	}
	dst = appendBoolElem(dst, "SupportOrdering", p.SupportOrdering)
	if opts.Runtime {
		dst = appendCountDetails(dst, e.Counts)
	}
	dst = appendDurationElem(dst, "AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	dst = appendBoolElem(dst, "EnablePartitioning", p.EnablePartitioning)
	dst = append(dst, "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>"...)
	dst = appendBoolElem(dst, "EnableExpress", p.EnableExpress)
	dst = appendForward(dst, "ForwardTo", p.ForwardTo, p.ForwardToURL, opts.Host)
	dst = appendForward(dst, "ForwardDeadLetteredMessagesTo", p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURL, opts.Host)
	dst = appendIntElem(dst, "MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes)
	return append(dst, "</QueueDescription>"...)
}

// appendTopic writes TopicDescription in the order of protocol.md §4.6 "Response order".
// UserMetadata is not in that recording; it goes after Status as for queues. SubscriptionCount
// comes from opts, and so do SqlFilterCount and CorrelationFilterCount, written last as a live
// GET at api-version 2024-05 shows them.
func appendTopic(dst []byte, e *broker.Entity, opts EncodeOptions) []byte {
	p := &e.Props
	dst = append(dst, "<TopicDescription"+descAttrs...)
	dst = appendDurationElem(dst, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	dst = appendIntElem(dst, "MaxSizeInMegabytes", p.TotalMaxSizeInMegabytes())
	dst = appendBoolElem(dst, "RequiresDuplicateDetection", p.RequiresDuplicateDetection)
	dst = appendDurationElem(dst, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
	dst = appendBoolElem(dst, "EnableBatchedOperations", p.EnableBatchedOperations)
	dst = appendIntElem(dst, "SizeInBytes", e.Counts.SizeInBytes)
	dst = appendBoolElem(dst, "FilteringMessagesBeforePublishing", p.FilteringMessagesBeforePublishing)
	dst = appendBoolElem(dst, "IsAnonymousAccessible", p.IsAnonymousAccessible)
	dst = appendAuthorizationRules(dst, p.AuthorizationRules)
	dst = appendTextElem(dst, "Status", string(p.Status))
	dst = appendOptionalElem(dst, "UserMetadata", p.UserMetadata)
	dst = appendTimeElem(dst, "CreatedAt", e.CreatedAt)
	dst = appendTimeElem(dst, "UpdatedAt", e.UpdatedAt)
	if opts.Runtime {
		dst = appendTimeElem(dst, "AccessedAt", e.AccessedAt)
	}
	dst = appendBoolElem(dst, "SupportOrdering", p.SupportOrdering)
	if opts.Runtime {
		dst = appendCountDetails(dst, e.Counts)
		dst = appendIntElem(dst, "SubscriptionCount", int64(opts.SubscriptionCount))
	}
	dst = appendDurationElem(dst, "AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	dst = appendBoolElem(dst, "EnablePartitioning", p.EnablePartitioning)
	dst = append(dst, "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>"...)
	dst = appendBoolElem(dst, "EnableSubscriptionPartitioning", p.EnableSubscriptionPartitioning)
	dst = appendBoolElem(dst, "EnableExpress", p.EnableExpress)
	dst = appendIntElem(dst, "MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes)
	if opts.Runtime && opts.FilterCounts {
		dst = appendIntElem(dst, "SqlFilterCount", opts.SQLFilterCount)
		dst = appendIntElem(dst, "CorrelationFilterCount", opts.CorrelationFilterCount)
	}
	return append(dst, "</TopicDescription>"...)
}

// appendSubscription writes SubscriptionDescription in the order of protocol.md §4.7 "Response
// order (real)". Unlike queues and topics, the service writes AccessedAt in every subscription
// response, so only CountDetails depends on opts.Runtime.
func appendSubscription(dst []byte, e *broker.Entity, opts EncodeOptions) []byte {
	p := &e.Props
	dst = append(dst, "<SubscriptionDescription"+descAttrs...)
	dst = appendDurationElem(dst, "LockDuration", p.LockDuration)
	dst = appendBoolElem(dst, "RequiresSession", p.RequiresSession)
	dst = appendDurationElem(dst, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	dst = appendBoolElem(dst, "DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	dst = appendBoolElem(dst, "DeadLetteringOnFilterEvaluationExceptions", p.DeadLetteringOnFilterEvaluation)
	dst = appendIntElem(dst, "MessageCount", e.Counts.Total())
	dst = appendIntElem(dst, "MaxDeliveryCount", int64(p.MaxDeliveryCount))
	dst = appendBoolElem(dst, "EnableBatchedOperations", p.EnableBatchedOperations)
	dst = appendTextElem(dst, "Status", string(p.Status))
	dst = appendForward(dst, "ForwardTo", p.ForwardTo, p.ForwardToURL, opts.Host)
	dst = appendOptionalElem(dst, "UserMetadata", p.UserMetadata)
	dst = appendTimeElem(dst, "CreatedAt", e.CreatedAt)
	dst = appendTimeElem(dst, "UpdatedAt", e.UpdatedAt)
	dst = appendTimeElem(dst, "AccessedAt", e.AccessedAt)
	if opts.Runtime {
		dst = appendCountDetails(dst, e.Counts)
	}
	dst = appendForward(dst, "ForwardDeadLetteredMessagesTo", p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURL, opts.Host)
	dst = appendDurationElem(dst, "AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	dst = append(dst, "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>"...)
	return append(dst, "</SubscriptionDescription>"...)
}

// appendCountDetails declares the counts namespace with exactly one prefixed attribute on
// CountDetails itself: the JS client reads the prefix from that single attribute and throws if
// there is any other.
func appendCountDetails(dst []byte, c broker.Counts) []byte {
	dst = append(dst, `<CountDetails xmlns:d2p1="`+nsCounts+`">`...)
	dst = appendIntElem(dst, "d2p1:ActiveMessageCount", c.Active)
	dst = appendIntElem(dst, "d2p1:DeadLetterMessageCount", c.DeadLetter)
	dst = appendIntElem(dst, "d2p1:ScheduledMessageCount", c.Scheduled)
	dst = appendIntElem(dst, "d2p1:TransferMessageCount", c.Transfer)
	dst = appendIntElem(dst, "d2p1:TransferDeadLetterMessageCount", c.TransferDeadLetter)
	return append(dst, "</CountDetails>"...)
}

// appendAuthorizationRules writes the rules as .NET's DataContract serializer does (§4.9); an
// empty list is an open and close tag, as the service writes it.
func appendAuthorizationRules(dst []byte, rules []broker.AuthorizationRule) []byte {
	dst = append(dst, "<AuthorizationRules>"...)
	for i := range rules {
		r := &rules[i]
		dst = append(dst, `<AuthorizationRule i:type="SharedAccessAuthorizationRule">`...)
		dst = append(dst, "<ClaimType>SharedAccessKey</ClaimType><ClaimValue>None</ClaimValue><Rights>"...)
		for _, right := range r.Rights {
			dst = appendTextElem(dst, "AccessRights", right)
		}
		dst = append(dst, "</Rights>"...)
		// The service leaves out the times the client did not give (the Go SDK's tests compare
		// a rule read back with the one sent, times absent); 0001-01-01 would be a time set.
		if !r.CreatedTime.IsZero() {
			dst = appendTimeElem(dst, "CreatedTime", r.CreatedTime)
		}
		if !r.ModifiedTime.IsZero() {
			dst = appendTimeElem(dst, "ModifiedTime", r.ModifiedTime)
		}
		dst = appendTextElem(dst, "KeyName", r.KeyName)
		dst = appendTextElem(dst, "PrimaryKey", r.PrimaryKey)
		dst = appendTextElem(dst, "SecondaryKey", r.SecondaryKey)
		dst = append(dst, "</AuthorizationRule>"...)
	}
	return append(dst, "</AuthorizationRules>"...)
}

// appendForward writes a forwarding target as the service does: in the form the client set it,
// when that was a URL (the Go SDK's tests compare an https:// target they set with what they
// read back), else as sb://host/path, the entity's own name under the host the client called.
// Empty targets are omitted.
func appendForward(dst []byte, name, path, url, host string) []byte {
	if path == "" {
		return dst
	}
	dst = appendOpen(dst, name)
	if url != "" {
		dst = appendEscaped(dst, url, false)
		return appendClose(dst, name)
	}
	if host != "" {
		dst = append(dst, "sb://"...)
		dst = appendEscaped(dst, host, false)
		dst = append(dst, '/')
	}
	dst = appendEscaped(dst, path, false)
	return appendClose(dst, name)
}

func appendOpen(dst []byte, name string) []byte {
	dst = append(dst, '<')
	dst = append(dst, name...)
	return append(dst, '>')
}

func appendClose(dst []byte, name string) []byte {
	dst = append(dst, "</"...)
	dst = append(dst, name...)
	return append(dst, '>')
}

func appendTextElem(dst []byte, name, value string) []byte {
	dst = appendOpen(dst, name)
	dst = appendEscaped(dst, value, false)
	return appendClose(dst, name)
}

func appendOptionalElem(dst []byte, name, value string) []byte {
	if value == "" {
		return dst
	}
	return appendTextElem(dst, name, value)
}

func appendIntElem(dst []byte, name string, v int64) []byte {
	dst = appendOpen(dst, name)
	dst = strconv.AppendInt(dst, v, 10)
	return appendClose(dst, name)
}

func appendBoolElem(dst []byte, name string, v bool) []byte {
	dst = appendOpen(dst, name)
	dst = strconv.AppendBool(dst, v)
	return appendClose(dst, name)
}

func appendDurationElem(dst []byte, name string, d time.Duration) []byte {
	dst = appendOpen(dst, name)
	dst = appendDuration(dst, d)
	return appendClose(dst, name)
}

func appendTimeElem(dst []byte, name string, t time.Time) []byte {
	dst = appendOpen(dst, name)
	dst = appendTime(dst, t)
	return appendClose(dst, name)
}

// FeedInfo is the Atom envelope of a list.
type FeedInfo struct {
	Title string // "Queues", "Topics", "Subscriptions" or "Rules"
	// ID is the request URL verbatim: azure-sb checks that it contains the request path.
	ID       string
	SelfHref string
	// NextHref is the URL of the next page; empty writes no rel="next" link. JS pages only by
	// following this link.
	NextHref string
	Updated  time.Time // written at second precision
}

// AppendFeed appends a feed whose entries are the given pre-encoded entries (each produced by
// AppendEntry, usually with EntryInfo.XMLBase set) to dst and returns the extended buffer. It
// cannot fail.
func AppendFeed(dst []byte, info FeedInfo, entries [][]byte) []byte {
	dst = append(dst, `<feed xmlns="`+nsAtom+`"><title type="text">`...)
	dst = appendEscaped(dst, info.Title, false)
	dst = append(dst, "</title><id>"...)
	dst = appendEscaped(dst, info.ID, false)
	dst = append(dst, "</id><updated>"...)
	dst = info.Updated.UTC().AppendFormat(dst, atomTimeLayout)
	dst = append(dst, `</updated><link rel="self" href="`...)
	dst = appendEscaped(dst, info.SelfHref, true)
	dst = append(dst, `"/>`...)
	if info.NextHref != "" {
		dst = append(dst, `<link rel="next" href="`...)
		dst = appendEscaped(dst, info.NextHref, true)
		dst = append(dst, `"/>`...)
	}
	for _, e := range entries {
		dst = append(dst, e...)
	}
	return append(dst, "</feed>"...)
}

// AppendNotFoundFeed appends the "Publicly Listed Services" feed that the service answers, with
// status 200, to a GET of a queue or topic that does not exist (protocol.md §4.2). The Go client
// recognises "not found" only by this title. The id is the one the service sent in recordings;
// clients do not read it. It cannot fail.
func AppendNotFoundFeed(dst []byte, updated time.Time) []byte {
	dst = append(dst, `<feed xmlns="`+nsAtom+`"><title type="text">Publicly Listed Services</title>`+
		`<subtitle type="text">This is the list of publicly-listed services currently available.</subtitle>`+
		`<id>uuid:db420b9f-e276-4d24-b8c4-9bfa94a8567a;id=196781</id><updated>`...)
	dst = updated.UTC().AppendFormat(dst, atomTimeLayout)
	return append(dst, "</updated><generator>Service Bus 1.1</generator></feed>"...)
}

// AppendError appends the management error body <Error><Code>{status}</Code><Detail>{detail}
// </Detail></Error> (escaped, no declaration, no namespace) to dst. Code is the numeric HTTP
// status because the Go and Java clients parse it as an integer. It cannot fail.
func AppendError(dst []byte, status int, detail string) []byte {
	dst = append(dst, "<Error><Code>"...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, "</Code><Detail>"...)
	dst = appendEscaped(dst, detail, false)
	return append(dst, "</Detail></Error>"...)
}

// appendEscaped appends s escaped for XML character data, or for a double-quoted attribute value
// when attr is set. Characters XML 1.0 cannot carry at all (control characters, invalid UTF-8,
// U+FFFE/U+FFFF) become U+FFFD so the document stays well-formed whatever a client stored. '\r'
// is written as a reference so that it survives the parser's line-end normalisation, and in
// attributes so are '\n' and '\t', which attribute normalisation would turn into spaces.
func appendEscaped(dst []byte, s string, attr bool) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			var esc string
			switch c {
			case '&':
				esc = "&amp;"
			case '<':
				esc = "&lt;"
			case '>':
				esc = "&gt;"
			case '"':
				if attr {
					esc = "&quot;"
				}
			case '\r':
				esc = "&#xD;"
			case '\n':
				if attr {
					esc = "&#xA;"
				}
			case '\t':
				if attr {
					esc = "&#x9;"
				}
			default:
				if c < 0x20 {
					esc = "\uFFFD"
				}
			}
			i++
			if esc != "" {
				dst = append(dst, s[last:i-1]...)
				dst = append(dst, esc...)
				last = i
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == 0xFFFE || r == 0xFFFF {
			dst = append(dst, s[last:i]...)
			dst = append(dst, "\uFFFD"...)
			last = i + size
		}
		i += size
	}
	return append(dst, s[last:]...)
}
