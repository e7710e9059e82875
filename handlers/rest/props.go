package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sbgate/sbgate/broker"
)

// rfc1123 is how Service Bus writes dates in BrokerProperties and user properties.
const rfc1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

// infiniteTTL is TimeSpan.MaxValue in seconds as the service prints it.
const infiniteTTL = "922337203685.47754"

// maxTTLSeconds is the largest TTL that fits a time.Duration; anything longer never expires.
var maxTTLSeconds = broker.Infinite.Seconds()

// brokerPropertyFields lists the sender-settable broker properties. Keys are matched without
// regard to case; read-only and unknown keys are ignored, as the service does.
var brokerStringFields = map[string]func(m *broker.Message) *string{
	"messageid":        func(m *broker.Message) *string { return &m.MessageID },
	"correlationid":    func(m *broker.Message) *string { return &m.CorrelationID },
	"sessionid":        func(m *broker.Message) *string { return &m.SessionID },
	"replytosessionid": func(m *broker.Message) *string { return &m.ReplyToSessionID },
	"label":            func(m *broker.Message) *string { return &m.Label },
	"to":               func(m *broker.Message) *string { return &m.To },
	"replyto":          func(m *broker.Message) *string { return &m.ReplyTo },
	"partitionkey":     func(m *broker.Message) *string { return &m.PartitionKey },
	"viapartitionkey":  func(m *broker.Message) *string { return &m.ViaPartitionKey },
}

// parseBrokerProperties reads a BrokerProperties JSON object into m. allowContentType lets a
// batch message carry its content type there. Errors are *broker.Error with CodeBadRequest.
func parseBrokerProperties(raw []byte, m *broker.Message, allowContentType bool) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || !atEOF(dec) {
		return broker.BadRequest("The BrokerProperties header is not a valid JSON object.")
	}
	if err := checkBrokerDuplicates(fields); err != nil {
		return err
	}
	for key, val := range fields {
		k := strings.ToLower(key)
		if f, ok := brokerStringFields[k]; ok {
			s, err := jsonText(val)
			if err != nil {
				return broker.BadRequest("BrokerProperties.%s must be a string.", key)
			}
			*f(m) = s
			if k == "sessionid" {
				// "SessionId":"" names the session "" (null names none).
				m.HasSessionID = string(bytes.TrimSpace(val)) != "null"
			}
			continue
		}
		if k == "contenttype" {
			if allowContentType {
				if err := parseBrokerContentType(key, val, m); err != nil {
					return err
				}
			}
			continue
		}
		if parse, ok := brokerTypedFields[k]; ok {
			if err := parse(val, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkBrokerDuplicates refuses BrokerProperties fields that give one property twice. Keys match
// without regard to case, so one property can be given twice; the map's order would pick the
// winner at random.
func checkBrokerDuplicates(fields map[string]json.RawMessage) error {
	seen := make(map[string]string, len(fields))
	for key := range fields {
		k := strings.ToLower(key)
		if k == "timetolivetimespan" {
			k = "timetolive" // another spelling of the same property
		}
		if _, ok := brokerStringFields[k]; !ok && k != "contenttype" && k != "timetolive" && k != "scheduledenqueuetimeutc" {
			continue
		}
		if other, dup := seen[k]; dup {
			a, b := min(key, other), max(key, other)
			return broker.BadRequest("BrokerProperties gives the same property more than once: '%s' and '%s'.", broker.Clip(a), broker.Clip(b))
		}
		seen[k] = key
	}
	return nil
}

// parseBrokerContentType reads BrokerProperties.ContentType (given as key) into m.
func parseBrokerContentType(key string, val json.RawMessage, m *broker.Message) error {
	s, err := jsonText(val)
	if err != nil {
		return broker.BadRequest("BrokerProperties.%s must be a string.", key)
	}
	if !headerSafe(s) {
		return broker.BadRequest("BrokerProperties.%s contains control characters, which cannot be sent in a Content-Type header.", key)
	}
	m.ContentType = s
	return nil
}

// brokerTypedFields read the broker properties that are neither strings nor ContentType into a
// message, by lower-case key.
var brokerTypedFields = map[string]func(val json.RawMessage, m *broker.Message) error{
	"timetolive":              parseBrokerTTL,
	"timetolivetimespan":      parseBrokerTTLTimeSpan,
	"scheduledenqueuetimeutc": parseBrokerScheduledTime,
}

// parseBrokerTTL reads BrokerProperties.TimeToLive, in seconds.
func parseBrokerTTL(val json.RawMessage, m *broker.Message) error {
	s, err := jsonText(val)
	if err != nil || s == "" {
		return broker.BadRequest("BrokerProperties.TimeToLive must be a number of seconds.")
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || secs <= 0 {
		return broker.BadRequest("BrokerProperties.TimeToLive must be a positive number of seconds.")
	}
	m.TimeToLive = secondsToDuration(secs)
	return nil
}

// parseBrokerTTLTimeSpan reads BrokerProperties.TimeToLiveTimeSpan, a .NET TimeSpan.
func parseBrokerTTLTimeSpan(val json.RawMessage, m *broker.Message) error {
	s, err := jsonText(val)
	if err != nil {
		return broker.BadRequest("BrokerProperties.TimeToLiveTimeSpan must be a string.")
	}
	d, err := parseTimeSpan(s)
	if err != nil || d <= 0 {
		return broker.BadRequest("BrokerProperties.TimeToLiveTimeSpan must be a positive [d.]hh:mm:ss[.fffffff] time span.")
	}
	m.TimeToLive = d
	return nil
}

// parseBrokerScheduledTime reads BrokerProperties.ScheduledEnqueueTimeUtc; "" schedules nothing.
func parseBrokerScheduledTime(val json.RawMessage, m *broker.Message) error {
	s, err := jsonText(val)
	if err != nil {
		return broker.BadRequest("BrokerProperties.ScheduledEnqueueTimeUtc must be a date string.")
	}
	if s == "" {
		return nil
	}
	t, ok := parseDate(s)
	if !ok {
		return broker.BadRequest("BrokerProperties.ScheduledEnqueueTimeUtc '%s' is not an RFC 1123 or ISO 8601 date.", broker.Clip(s))
	}
	m.ScheduledEnqueueTime = t
	return nil
}

// atEOF reports whether only white space is left after the value dec decoded. Decoder.More is not
// enough: it lets a stray '}' or ']' through.
func atEOF(dec *json.Decoder) bool {
	_, err := dec.Token()
	return err == io.EOF
}

// jsonText returns a JSON string's text, or a number's or boolean's literal (the legacy Python
// client sends every value as a string, others numbers; both mean the same). null is "".
func jsonText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' || string(raw) == "true" || string(raw) == "false":
		return string(raw), nil
	}
	return "", fmt.Errorf("not a scalar")
}

func secondsToDuration(secs float64) time.Duration {
	if secs >= maxTTLSeconds {
		return broker.Infinite
	}
	d := time.Duration(secs * float64(time.Second))
	if d <= 0 {
		d = time.Nanosecond
	}
	return d
}

var timeSpanRE = regexp.MustCompile(`^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,7}))?$`)

// parseTimeSpan parses a .NET TimeSpan "[d.]hh:mm:ss[.fffffff]".
func parseTimeSpan(s string) (time.Duration, error) {
	p := timeSpanRE.FindStringSubmatch(strings.TrimSpace(s))
	if p == nil {
		return 0, fmt.Errorf("bad time span %q", s)
	}
	num := func(x string) float64 {
		if x == "" {
			return 0
		}
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	h, mi, se := num(p[2]), num(p[3]), num(p[4])
	if h > 23 || mi > 59 || se > 59 {
		return 0, fmt.Errorf("bad time span %q", s)
	}
	secs := num(p[1])*86400 + h*3600 + mi*60 + se
	if p[5] != "" {
		secs += num("0." + p[5])
	}
	if secs == 0 {
		return 0, nil // secondsToDuration would make it 1ns; callers refuse a zero span
	}
	return secondsToDuration(secs), nil
}

// dateLayouts are the date forms accepted in broker and user properties: RFC 1123 as the service
// writes it, with azure-sb's "GMT+0000" suffix, and ISO 8601.
var dateLayouts = []string{
	rfc1123,
	"Mon, 02 Jan 2006 15:04:05 GMT-0700",
	time.RFC1123Z,
	time.RFC1123,
	time.RFC3339Nano,
	"2006-01-02T15:04:05.9999999",
	"2006-01-02T15:04:05",
}

// rfc822Zones are the zone names besides GMT that RFC 1123 dates may carry (RFC 822 §5.1), as
// hours from UTC. time.Parse knows an abbreviation only when it names the local zone and reads any
// other as UTC, which would shift "14:27:00 PST" by eight hours.
var rfc822Zones = map[string]int{"EST": -5, "EDT": -4, "CST": -6, "CDT": -5, "MST": -7, "MDT": -6, "PST": -8, "PDT": -7}

func parseDate(s string) (time.Time, bool) {
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			if name, _ := t.Zone(); layout == time.RFC1123 {
				if h, ok := rfc822Zones[name]; ok {
					t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.FixedZone(name, h*3600))
				}
			}
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// formatBrokerProperties writes the BrokerProperties header of a received message. Keys are in
// ordinal order and present only when set, as the service emits them. It appends to one buffer:
// a receive writes it for every message.
func formatBrokerProperties(m *broker.Message, now time.Time) []byte {
	b := make([]byte, 0, 512)
	b = append(b, '{')
	// In ordinal order of the keys; the optional ones only when set.
	b = appendStringField(b, "CorrelationId", m.CorrelationID)
	b = appendStringField(b, "DeadLetterSource", m.DeadLetterSource)
	b = strconv.AppendInt(appendKey(b, "DeliveryCount"), int64(m.DeliveryCount), 10)
	b = strconv.AppendInt(appendKey(b, "EnqueuedSequenceNumber"), m.EnqueuedSequenceNumber, 10)
	b = appendDate(appendKey(b, "EnqueuedTimeUtc"), m.EnqueuedTime)
	if !m.ExpiresAt.IsZero() {
		// EnqueuedTimeUtc + TimeToLive; absent for a TTL that never ends, as the service's own
		// responses show for TimeSpan.MaxValue.
		b = appendDate(appendKey(b, "ExpiresAtUtc"), m.ExpiresAt)
	}
	b = appendStringField(b, "Label", m.Label)
	if !m.LockedUntil.IsZero() {
		b = append(appendKey(b, "LockToken"), '"')
		b = append(appendUUID(b, m.LockToken), '"')
		b = appendDate(appendKey(b, "LockedUntilUtc"), m.LockedUntil)
	}
	b = appendJSONString(appendKey(b, "MessageId"), m.MessageID)
	b = appendStringField(b, "PartitionKey", m.PartitionKey)
	b = appendStringField(b, "ReplyTo", m.ReplyTo)
	b = appendStringField(b, "ReplyToSessionId", m.ReplyToSessionID)
	if !m.ScheduledEnqueueTime.IsZero() {
		b = appendDate(appendKey(b, "ScheduledEnqueueTimeUtc"), m.ScheduledEnqueueTime)
	}
	b = strconv.AppendInt(appendKey(b, "SequenceNumber"), m.SequenceNumber, 10)
	if m.InSession() {
		b = appendJSONString(appendKey(b, "SessionId"), m.SessionID) // "" included: it is a session
	}
	b = appendJSONString(appendKey(b, "State"), stateName(m, now))
	b = append(appendKey(b, "TimeToLive"), ttlNumber(m.TimeToLive)...)
	b = appendStringField(b, "To", m.To)
	b = appendStringField(b, "ViaPartitionKey", m.ViaPartitionKey)
	return append(b, '}')
}

// appendStringField appends "key":"value" when value is not empty.
func appendStringField(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	return appendJSONString(appendKey(b, key), value)
}

// appendKey appends "key": after a comma unless it is the first field.
func appendKey(b []byte, key string) []byte {
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendDate appends t in UTC as an RFC 1123 date, a JSON string: the form has nothing to
// escape.
func appendDate(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, rfc1123)
	return append(b, '"')
}

// appendUUID appends u in its canonical form (as uuid.UUID.String writes it).
func appendUUID(b []byte, u uuid.UUID) []byte {
	const hex = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return b
}

// appendJSONString appends s as a JSON string exactly as encoding/json writes it: control
// characters, quotes and backslashes escaped, and <, >, & and U+2028/U+2029 too, so that the
// header reads the same as before it was written by hand.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// stateName is the State a receiver sees.
func stateName(m *broker.Message, now time.Time) string {
	switch {
	case m.State == broker.StateDeferred:
		return "Deferred"
	case m.LockedUntil.IsZero() && m.ScheduledEnqueueTime.After(now):
		return "Scheduled"
	}
	return "Active"
}

// ttlNumber prints a TTL in seconds as a JSON number; unbounded is TimeSpan.MaxValue.
func ttlNumber(d time.Duration) json.Number {
	if d == broker.Infinite || d <= 0 {
		return infiniteTTL
	}
	return json.Number(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
}

// Which request headers are user properties (protocol.md §2.11). A property a client sent must
// arrive or the send must be refused, so the names set aside are only those an HTTP client, a
// proxy or the protocol itself puts on a request without the application asking; the README
// lists them. Names are compared in lower case.
var (
	// protocolHeaders carry the request itself: its credentials, its broker properties, its body's
	// type and framing, and the connection. Never user properties.
	protocolHeaders = map[string]bool{
		"authorization": true, "servicebusauthorization": true, "brokerproperties": true,
		"servicebussupplementaryauthorization": true, "servicebusdlqsupplementaryauthorization": true,
		"content-type": true, "content-length": true, "transfer-encoding": true, "host": true,
		"connection": true, "keep-alive": true, "proxy-connection": true, "te": true, "trailer": true,
		"upgrade": true, "expect": true, "proxy-authorization": true,
	}
	// clientHeaders are added by HTTP client libraries on their own: Node's and azure-sb's,
	// .NET's, Python's, Go's, curl, and the Azure SDKs' pipelines (x-ms-*), and W3C trace context
	// from instrumented clients.
	clientHeaders = map[string]bool{
		"user-agent": true, "accept": true, "accept-charset": true, "accept-encoding": true,
		"traceparent": true, "tracestate": true,
	}
	clientHeaderPrefixes = []string{"x-ms-"}
	// proxyHeaders are added by reverse proxies. They are set aside only on requests that come
	// from a trusted proxy (-trusted-proxies); from anyone else they are user properties.
	proxyHeaders        = map[string]bool{"forwarded": true, "via": true, "x-real-ip": true}
	proxyHeaderPrefixes = []string{"x-forwarded-"}
	// responseHeaders are headers a received message is answered with besides its user
	// properties; a user property of that name could not come back, so it is refused.
	responseHeaders = map[string]bool{
		"location": true, "deadletterreason": true, "deadlettererrordescription": true,
	}
)

// skippedHeader reports whether a request header is set aside rather than read as a user
// property: fromProxy says the request came through a trusted proxy.
func skippedHeader(lower string, fromProxy bool) bool {
	if protocolHeaders[lower] || clientHeaders[lower] || hasAnyPrefix(lower, clientHeaderPrefixes) {
		return true
	}
	return fromProxy && (proxyHeaders[lower] || hasAnyPrefix(lower, proxyHeaderPrefixes))
}

// reservedPropertyName reports whether a user property may not have this name in a batch: one a
// single send (through a trusted proxy when fromProxy) could not carry as a header, or a receive
// could not return.
func reservedPropertyName(lower string, fromProxy bool) bool {
	return skippedHeader(lower, fromProxy) || responseHeaders[lower] || lower == "content-encoding"
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// userPropertiesFromHeaders reads every request header not set aside (skippedHeader) as a user
// property. Names are stored in lower case: Go's HTTP server canonicalises header names, so the
// sender's casing cannot be recovered, and lower case is what HTTP/2 and Node clients use anyway.
// A header that names a response header (Location, …) is refused: it could not be returned.
func userPropertiesFromHeaders(h http.Header, fromProxy bool) (broker.UserProperties, error) {
	var props broker.UserProperties
	for name, values := range h {
		lower := strings.ToLower(name)
		if skippedHeader(lower, fromProxy) {
			continue
		}
		if responseHeaders[lower] {
			return nil, broker.BadRequest("'%s' cannot be a user property name: a received message carries a header of that name.", broker.Clip(name))
		}
		if lower == "content-encoding" {
			if strings.EqualFold(strings.TrimSpace(values[0]), "identity") {
				continue // the body as it is
			}
			return nil, broker.BadRequest("Content-Encoding '%s' is not supported: send the message body as it is to be received.", broker.Clip(values[0]))
		}
		if len(values) != 1 {
			return nil, broker.BadRequest("The user property header '%s' is given %d times.", broker.Clip(name), len(values))
		}
		props = append(props, broker.Property{Name: lower, Value: parsePropertyValue(values[0])})
	}
	return props, nil
}

var (
	integerRE = regexp.MustCompile(`^-?[0-9]+$`)
	floatRE   = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
)

// parsePropertyValue types a user property header value (protocol.md §2.11): a quoted value is a
// date when it parses as one, else a string; bare true/false is a bool, digits an int64, a
// decimal a double; anything else is kept as a string, as the service does for unquoted text.
func parsePropertyValue(v string) any {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		s := unescapeQuoted(v[1 : len(v)-1])
		if t, ok := parseDate(s); ok && looksLikeDate(s) {
			return t
		}
		return s
	}
	switch {
	case v == "true":
		return true
	case v == "false":
		return false
	case integerRE.MatchString(v):
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	if floatRE.MatchString(v) {
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) {
			return f
		}
	}
	return v
}

// looksLikeDate keeps strings such as "2024" or "1" (which some layouts could read) strings: only
// values with a day-of-week comma or an ISO 'T' between date and time are dates.
func looksLikeDate(s string) bool {
	return strings.Contains(s, ",") || (len(s) >= 19 && s[10] == 'T')
}

func unescapeQuoted(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// quoteEscaper escapes a string user property's backslashes and quotes for its header.
var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// formatPropertyValue writes a user property as a header value, the inverse of
// parsePropertyValue for the types a REST send makes (string, int64, float64, bool, time.Time).
// The other types a message can carry (sent over AMQP) are written as a Service Bus REST client
// reads the nearest type it knows: integers and decimals as numbers; a char, Guid, Uri or
// symbol as a quoted string; a DateTimeOffset as a quoted RFC 1123 date (UTC: AMQP carries no
// offset); a TimeSpan as a quoted .NET TimeSpan ("[-][d.]hh:mm:ss[.fffffff]"); binary as quoted
// base64. A REST send of the header again gives the nearest REST type, not the original one;
// the stored property keeps its type whatever REST shows (README, "What REST shows").
func formatPropertyValue(v any) string {
	quoted := func(s string) string { return `"` + quoteEscaper.Replace(s) + `"` }
	switch x := v.(type) {
	case string:
		return quoted(x)
	case time.Time:
		return `"` + x.UTC().Format(rfc1123) + `"`
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case time.Duration: // only a rule action can produce one
		return `"` + broker.TimeSpanOf(x).String() + `"`
	case float64:
		return doubleText(strconv.FormatFloat(x, 'f', -1, 64))
	case float32:
		return doubleText(strconv.FormatFloat(float64(x), 'f', -1, 32))
	case broker.Decimal32:
		return decimalText(x.Text())
	case broker.Decimal64:
		return decimalText(x.Text())
	case broker.Decimal128:
		return decimalText(x.Text())
	case broker.Char:
		return quoted(string(rune(x)))
	case uuid.UUID:
		return `"` + x.String() + `"`
	case broker.URI:
		return quoted(string(x))
	case broker.Symbol:
		return quoted(string(x))
	case broker.DateTimeOffset:
		return `"` + x.Time().Format(rfc1123) + `"`
	case broker.TimeSpan:
		return `"` + x.String() + `"`
	case []byte:
		return `"` + base64.StdEncoding.EncodeToString(x) + `"`
	case nil: // an AMQP property present without a value
		return "null"
	}
	return `""`
}

// doubleText is a floating-point number's text with a fraction, so that it stays a double on
// the way back.
func doubleText(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// decimalText is a decimal's exact text as a number; a NaN or an infinity, which JSON and the
// REST clients' number parsers do not read, is quoted.
func decimalText(s string) string {
	if strings.ContainsAny(s, "NI") {
		return `"` + s + `"`
	}
	return s
}

// headerSafe reports whether s can be written as an HTTP header value unchanged: no control
// characters but tab. Go's server turns CR and LF into spaces, and clients refuse a response with
// any other control character, so a message carrying one could never be received.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validPropertyName reports whether name can travel as an HTTP header name (a token) and is not
// reserved (reservedPropertyName).
func validPropertyName(name string, fromProxy bool) bool {
	if name == "" || reservedPropertyName(strings.ToLower(name), fromProxy) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}
