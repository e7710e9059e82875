package broker

import (
	"strings"
)

// SubscriptionsSegment joins a topic path and a subscription name.
const SubscriptionsSegment = "/Subscriptions/"

// SubscriptionPath returns the path of subscription name on topic.
func SubscriptionPath(topic, name string) string { return topic + SubscriptionsSegment + name }

// SplitSubscriptionPath splits "topic/Subscriptions/name" (any casing). ok is false for a path
// that does not name a subscription.
func SplitSubscriptionPath(path string) (topic, name string, ok bool) {
	i := strings.LastIndex(strings.ToLower(path), strings.ToLower(SubscriptionsSegment))
	if i <= 0 {
		return "", "", false
	}
	topic, name = path[:i], path[i+len(SubscriptionsSegment):]
	if name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return topic, name, true
}

// reservedSegments are path segments that address something inside an entity, so an entity
// name may not contain them as a segment: "orders/messages" would be ambiguous with a send.
var reservedSegments = map[string]bool{"messages": true, "subscriptions": true, "rules": true, "sessions": true}

// reservedTopLevel are the gateway's own endpoints (GET /healthz, /readyz, /metrics), which an
// entity at the top level would shadow.
var reservedTopLevel = map[string]bool{"healthz": true, "readyz": true, "metrics": true}

// ValidateEntityPath checks a queue or topic path: at most 260 characters, segments separated
// by '/', made of letters, digits, '.', '-' and '_', starting and ending with a letter or digit,
// no segment a reserved word. It returns an ErrBadRequest error that names the problem.
func ValidateEntityPath(path string) error {
	if path == "" {
		return BadRequest("The entity path is empty.")
	}
	if len(path) > MaxEntityPathLength {
		return BadRequest("The entity path '%s' is longer than %d characters.", Clip(path), MaxEntityPathLength)
	}
	if !isAlnum(path[0]) || !isAlnum(path[len(path)-1]) {
		return BadRequest("The entity path '%s' is not valid: it must start and end with a letter or number.", Clip(path))
	}
	if first, _, _ := strings.Cut(path, "/"); reservedTopLevel[strings.ToLower(first)] {
		return BadRequest("'%s' is reserved for the gateway's own endpoints and cannot begin an entity path.", first)
	}
	for _, seg := range strings.Split(path, "/") {
		if err := validateSegment(path, seg); err != nil {
			return err
		}
		if reservedSegments[strings.ToLower(seg)] {
			return BadRequest("The entity path '%s' contains the reserved segment '%s'.", path, seg)
		}
	}
	return nil
}

// ValidateSubscriptionName checks a subscription (or rule) name: one segment of at most 50
// characters from the same alphabet as entity paths.
func ValidateSubscriptionName(name string) error {
	if name == "" {
		return BadRequest("The subscription name is empty.")
	}
	if len(name) > MaxSubscriptionNameLength {
		return BadRequest("The name '%s' is longer than %d characters.", Clip(name), MaxSubscriptionNameLength)
	}
	if err := validateSegment(name, name); err != nil {
		return err
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return BadRequest("The name '%s' is not valid: it must start and end with a letter or number.", name)
	}
	if reservedSegments[strings.ToLower(name)] {
		return BadRequest("'%s' is a reserved word and cannot be a name here.", name)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validateSegment(path, seg string) error {
	if seg == "" {
		return BadRequest("The entity path '%s' has an empty segment; it may not start or end with '/' or contain '//'.", path)
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !isAlnum(c) && c != '.' && c != '-' && c != '_' {
			return BadRequest("'%s' contains character(s) that is not allowed by Service Bus. Entity segments can contain only letters, numbers, periods (.), hyphens (-), and underscores (_).", Clip(path))
		}
	}
	return nil
}
