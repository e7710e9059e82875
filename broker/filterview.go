package broker

import (
	"fmt"
	"strings"
	"time"

	"github.com/sbgate/sbgate/sqlfilter"
)

// FilterView lets SQL filters read, and rule actions change, a message: sys.* names are its
// broker properties, user.* names its application properties (case-insensitively). Known
// broker properties the sender left unset read as null; unknown sys.* names are absent, which
// the filter language reports as an error, as Service Bus does. The dead-letter reason and
// description read as user properties, as on the service.
func FilterView(m *Message) sqlfilter.MutableMessage { return filterView{m} }

type filterView struct{ m *Message }

var _ sqlfilter.MutableMessage = filterView{}

func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func optionalTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func (v filterView) System(name string) (any, bool) {
	m := v.m
	switch strings.ToLower(name) {
	case "messageid":
		return optional(m.MessageID), true
	case "correlationid":
		return optional(m.CorrelationID), true
	case "sessionid":
		if m.InSession() {
			return m.SessionID, true // "" is a session
		}
		return nil, true
	case "replytosessionid":
		return optional(m.ReplyToSessionID), true
	case "label", "subject":
		return optional(m.Label), true
	case "to":
		return optional(m.To), true
	case "replyto":
		return optional(m.ReplyTo), true
	case "partitionkey":
		return optional(m.PartitionKey), true
	case "viapartitionkey":
		return optional(m.ViaPartitionKey), true
	case "contenttype":
		return optional(m.ContentType), true
	case "sequencenumber":
		return m.SequenceNumber, true
	case "enqueuedtimeutc":
		return optionalTime(m.EnqueuedTime), true
	case "scheduledenqueuetimeutc":
		return optionalTime(m.ScheduledEnqueueTime), true
	case "expiresatutc":
		return optionalTime(m.ExpiresAt), true
	case "timetolive":
		if m.TimeToLive == Infinite || m.TimeToLive <= 0 {
			return nil, true
		}
		return m.TimeToLive, true
	case "deliverycount":
		return int64(m.DeliveryCount), true
	case "size":
		return int64(MessageSize(m, 0) + userPropertiesSize(m.UserProperties)), true
	case "deadlettersource":
		return optional(m.DeadLetterSource), true
	}
	return nil, false
}

func (v filterView) User(name string) (any, bool) {
	for _, p := range v.m.UserProperties {
		if strings.EqualFold(p.Name, name) {
			return p.Value, true
		}
	}
	switch {
	case strings.EqualFold(name, "DeadLetterReason") && v.m.DeadLetterReason != "":
		return v.m.DeadLetterReason, true
	case strings.EqualFold(name, "DeadLetterErrorDescription") && v.m.DeadLetterDescription != "":
		return v.m.DeadLetterDescription, true
	}
	return nil, false
}

// settable are the broker properties a rule action may SET or REMOVE.
func (v filterView) settable(name string) (*string, bool) {
	m := v.m
	switch strings.ToLower(name) {
	case "messageid":
		return &m.MessageID, true
	case "correlationid":
		return &m.CorrelationID, true
	case "sessionid":
		return &m.SessionID, true
	case "replytosessionid":
		return &m.ReplyToSessionID, true
	case "label", "subject":
		return &m.Label, true
	case "to":
		return &m.To, true
	case "replyto":
		return &m.ReplyTo, true
	case "partitionkey":
		return &m.PartitionKey, true
	case "contenttype":
		return &m.ContentType, true
	}
	return nil, false
}

func (v filterView) SetSystem(name string, val any) error {
	p, ok := v.settable(name)
	if !ok {
		return fmt.Errorf("system property %q cannot be set by a rule action", name)
	}
	switch x := val.(type) {
	case nil:
		*p = ""
	case string:
		*p = x
	default:
		*p = fmt.Sprint(x)
	}
	if p == &v.m.SessionID {
		v.m.HasSessionID = val != nil // SET sys.SessionId = '' names the session "", REMOVE none
	}
	return nil
}

func (v filterView) RemoveSystem(name string) error { return v.SetSystem(name, nil) }

func (v filterView) SetUser(name string, val any) {
	switch x := val.(type) {
	case int:
		val = int64(x)
	case int32:
		val = int64(x)
	case float32:
		val = float64(x)
	case nil:
		v.RemoveUser(name)
		return
	}
	for i, p := range v.m.UserProperties {
		if strings.EqualFold(p.Name, name) {
			v.m.UserProperties[i].Value = val
			return
		}
	}
	v.m.UserProperties = append(v.m.UserProperties, Property{Name: name, Value: val})
}

func (v filterView) RemoveUser(name string) {
	props := v.m.UserProperties[:0]
	for _, p := range v.m.UserProperties {
		if !strings.EqualFold(p.Name, name) {
			props = append(props, p)
		}
	}
	v.m.UserProperties = props
}

// userPropertiesSize approximates what application properties add to a message's size: a name
// and 8 bytes each, and the bytes of a value of variable length.
func userPropertiesSize(props UserProperties) int {
	n := 0
	for _, p := range props {
		n += len(p.Name) + 8
		switch v := p.Value.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		case URI:
			n += len(v)
		case Symbol:
			n += len(v)
		}
	}
	return n
}
