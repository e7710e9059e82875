package sqlfilter

// CorrelationFilter matches messages by equality on a fixed set of system properties and
// any number of user properties (protocol.md §7.3). It is cheaper than a SQL filter and
// is what clients create when they only need equality.
type CorrelationFilter struct {
	CorrelationID, MessageID, To, ReplyTo, Label, SessionID, ReplyToSessionID, ContentType string // "" = not set

	// Properties are user properties that must be present and equal. Equality is typed:
	// int64 and float64 compare numerically, strings case-sensitively, and a nil value
	// matches a property that is present with a null value. Names match
	// case-insensitively, like property names in SQL filters; Service Bus itself
	// documents no rule, and one rule for both filter kinds is less surprising.
	Properties map[string]any
}

// Match reports whether every set field equals the message's property. String fields
// compare case-sensitively with the system property of the same name; an unset, null or
// non-string system property never equals a set field. A filter with nothing set matches
// every message.
func (c *CorrelationFilter) Match(m Message) bool {
	return sysEquals(m, "CorrelationId", c.CorrelationID) &&
		sysEquals(m, "MessageId", c.MessageID) &&
		sysEquals(m, "To", c.To) &&
		sysEquals(m, "ReplyTo", c.ReplyTo) &&
		sysEquals(m, "Label", c.Label) &&
		sysEquals(m, "SessionId", c.SessionID) &&
		sysEquals(m, "ReplyToSessionId", c.ReplyToSessionID) &&
		sysEquals(m, "ContentType", c.ContentType) &&
		c.propertiesMatch(m)
}

func sysEquals(m Message, name, want string) bool {
	if want == "" {
		return true
	}
	v, ok := m.System(name)
	if !ok {
		return false
	}
	s, ok := v.(string)
	return ok && s == want
}

func (c *CorrelationFilter) propertiesMatch(m Message) bool {
	for name, want := range c.Properties {
		got, ok := m.User(name)
		if !ok {
			return false
		}
		g, ok1 := valueOf(got)
		w, ok2 := valueOf(want)
		if !ok1 || !ok2 || !equal(g, w) {
			return false
		}
	}
	return true
}
