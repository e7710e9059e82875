package sqlfilter

import (
	"errors"
	"testing"
)

func TestMapMessage(t *testing.T) {
	m := &MapMessage{
		Sys: map[string]any{"label": "l"},
		Usr: map[string]any{"Region": "eu", "nothing": nil},
	}
	lookups := []struct {
		sys    bool
		name   string
		want   any
		wantOK bool
	}{
		{true, "label", "l", true},
		{true, "LABEL", "l", true},
		{true, "CorrelationId", nil, true}, // known but unset
		{true, "correlationid", nil, true},
		{true, "Nope", nil, false},
		{false, "Region", "eu", true},
		{false, "region", "eu", true},
		{false, "nothing", nil, true},
		{false, "missing", nil, false},
		{false, "Label", nil, false}, // scopes are separate
	}
	for _, tt := range lookups {
		var got any
		var ok bool
		if tt.sys {
			got, ok = m.System(tt.name)
		} else {
			got, ok = m.User(tt.name)
		}
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("lookup(sys=%v, %q) = %v, %v; want %v, %v", tt.sys, tt.name, got, ok, tt.want, tt.wantOK)
		}
	}

	m.SetUser("REGION", "us")
	if len(m.Usr) != 2 || m.Usr["REGION"] != "us" {
		t.Errorf("SetUser(REGION) left %v; want one region property", m.Usr)
	}
	m.RemoveUser("region")
	if _, ok := m.User("region"); ok {
		t.Errorf("RemoveUser(region) left %v", m.Usr)
	}
	if err := m.SetSystem("LABEL", "x"); err != nil || len(m.Sys) != 1 || m.Sys["Label"] != "x" {
		t.Errorf("SetSystem(LABEL) = %v, left %v; want Label=x", err, m.Sys)
	}
	if err := m.SetSystem("Size", int64(1)); !errors.Is(err, ErrReadOnlySystemProperty) {
		t.Errorf("SetSystem(Size) = %v; want ErrReadOnlySystemProperty", err)
	}
	if err := m.SetSystem("Nope", 1); !errors.Is(err, ErrUnknownSystemProperty) {
		t.Errorf("SetSystem(Nope) = %v; want ErrUnknownSystemProperty", err)
	}
	if err := m.RemoveSystem("label"); err != nil || len(m.Sys) != 0 {
		t.Errorf("RemoveSystem(label) = %v, left %v", err, m.Sys)
	}

	var empty MapMessage
	empty.SetUser("a", 1)
	if err := empty.SetSystem("To", "x"); err != nil || empty.Usr["a"] != 1 || empty.Sys["To"] != "x" {
		t.Errorf("setting on a zero MapMessage: %v, %v, %v", err, empty.Usr, empty.Sys)
	}
}
