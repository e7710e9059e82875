package store

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"
)

// Limits on application properties (protocol.md §7.1).
const (
	MaxPropertySize        = 32 * 1024
	MaxAllPropertiesSize   = 64 * 1024
	maxUserPropertiesCount = 1000
)

// User properties are stored as a jsonb object whose values carry their type, so an int stays an
// int and a date a date on the way back: {"n":{"i":1},"s":{"s":"x"},"f":{"f":2.5},"b":{"b":true},
// "d":{"d":"2024-01-02T03:04:05Z"}}.
type typedValue struct {
	T *int64   `json:"t,omitempty"` // a time span in nanoseconds (rule parameters, action results)
	S *string  `json:"s,omitempty"`
	I *int64   `json:"i,omitempty"`
	F *float64 `json:"f,omitempty"`
	B *bool    `json:"b,omitempty"`
	D *string  `json:"d,omitempty"`
	X string   `json:"x,omitempty"` // a rule value's declared type (Property.Type)
}

// encodeUserProperties checks the properties and returns their jsonb text, or nil when there are
// none. Errors: ErrBadRequest for a duplicate name, an unsupported type, a non-finite number or a
// size over the limits.
func encodeUserProperties(props UserProperties) ([]byte, error) {
	if len(props) == 0 {
		return nil, nil
	}
	if len(props) > maxUserPropertiesCount {
		return nil, BadRequest("A message may carry at most %d application properties.", maxUserPropertiesCount)
	}
	m := make(map[string]typedValue, len(props))
	total := 0
	for _, p := range props {
		if _, dup := m[p.Name]; dup {
			return nil, BadRequest("The application property '%s' is given more than once.", Clip(p.Name))
		}
		if p.Name == "" || !validText(p.Name) {
			return nil, BadRequest("An application property name is empty, not valid UTF-8 or contains a NUL character.")
		}
		var tv typedValue
		size := len(p.Name)
		switch v := p.Value.(type) {
		case string:
			if !validText(v) {
				return nil, BadRequest("The application property '%s' is not valid UTF-8 text (or contains a NUL character).", Clip(p.Name))
			}
			tv.S = &v
			size += len(v)
		case int64:
			tv.I = &v
			size += 8
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, BadRequest("The application property '%s' is not a finite number.", Clip(p.Name))
			}
			tv.F = &v
			size += 8
		case bool:
			tv.B = &v
			size++
		case time.Time:
			d := v.UTC().Format(time.RFC3339Nano)
			tv.D = &d
			size += 8
		case time.Duration:
			n := int64(v)
			tv.T = &n
			size += 8
		default:
			return nil, BadRequest("The application property '%s' has an unsupported type %T.", Clip(p.Name), p.Value)
		}
		if p.Type != "" {
			if !ruleValueTypeFits(p.Type, p.Value) {
				return nil, BadRequest("The value of '%s' does not have its declared type '%s'.", Clip(p.Name), Clip(p.Type))
			}
			tv.X = p.Type
		}
		if size > MaxPropertySize {
			return nil, BadRequest("The application property '%s' is larger than %d bytes.", Clip(p.Name), MaxPropertySize)
		}
		total += size
		m[p.Name] = tv
	}
	if total > MaxAllPropertiesSize {
		return nil, BadRequest("The application properties of a message are larger than %d bytes.", MaxAllPropertiesSize)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode application properties: %w", err)
	}
	return b, nil
}

// decodeUserProperties reverses encodeUserProperties; properties come back sorted by name.
func decodeUserProperties(raw []byte) (UserProperties, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]typedValue
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode application properties: %w", err)
	}
	props := make(UserProperties, 0, len(m))
	for name, tv := range m {
		var v any
		switch {
		case tv.T != nil:
			v = time.Duration(*tv.T)
		case tv.S != nil:
			v = *tv.S
		case tv.I != nil:
			v = *tv.I
		case tv.F != nil:
			v = *tv.F
		case tv.B != nil:
			v = *tv.B
		case tv.D != nil:
			t, err := time.Parse(time.RFC3339Nano, *tv.D)
			if err != nil {
				return nil, fmt.Errorf("decode application property %q: %w", name, err)
			}
			v = t
		default:
			return nil, fmt.Errorf("decode application property %q: no value", name)
		}
		props = append(props, Property{Name: name, Value: v, Type: tv.X})
	}
	sort.Slice(props, func(i, j int) bool { return props[i].Name < props[j].Name })
	return props, nil
}
