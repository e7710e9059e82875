package sas

import (
	"errors"
	"strings"
	"testing"
)

func TestRightsHas(t *testing.T) {
	tests := []struct {
		r, need Rights
		want    bool
	}{
		{Send, Send, true},
		{Send, Listen, false},
		{Send, Manage, false},
		{Listen, Listen, true},
		{Listen, Send, false},
		{Send | Listen, Send | Listen, true},
		{Send | Listen, Manage, false},
		{Manage, Send, true}, // Manage implies Send
		{Manage, Listen, true},
		{Manage, Manage, true},
		{Manage, Send | Listen | Manage, true},
		{Send, Send | Listen, false},
		{0, Send, false},
		{0, 0, true},
		{Send, 0, true},
	}
	for _, tt := range tests {
		if got := tt.r.Has(tt.need); got != tt.want {
			t.Errorf("Rights(%q).Has(%q) = %v; want %v", tt.r, tt.need, got, tt.want)
		}
	}
}

func TestRightsString(t *testing.T) {
	tests := []struct {
		r    Rights
		want string
	}{
		{0, "None"},
		{Send, "Send"},
		{Listen, "Listen"},
		{Manage, "Manage"},
		{Send | Listen, "Listen,Send"},
		{Send | Listen | Manage, "Manage,Listen,Send"},
		{Send | 0x80, "Send,0x80"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("Rights(%d).String() = %q; want %q", uint8(tt.r), got, tt.want)
		}
	}
}

func TestRightsClaimText(t *testing.T) {
	tests := []struct {
		r    Rights
		want string
	}{
		{Send, "Send"},
		{Listen, "Listen"},
		{Manage, "Manage,EntityRead"},
		{Send | Listen, "Send,Listen"},
		{0, ""},
	}
	for _, tt := range tests {
		if got := tt.r.ClaimText(); got != tt.want {
			t.Errorf("Rights(%q).ClaimText() = %q; want %q", tt.r, got, tt.want)
		}
	}
}

func TestParseRights(t *testing.T) {
	tests := []struct {
		names   []string
		want    Rights
		wantErr bool
	}{
		{[]string{"Send"}, Send, false},
		{[]string{"listen"}, Listen, false},
		{[]string{"MANAGE"}, Manage, false},
		{[]string{"Send", "Listen"}, Send | Listen, false},
		{[]string{" Send ", "Listen", "Manage"}, Send | Listen | Manage, false},
		{[]string{"Send", "send"}, Send, false},
		{nil, 0, true},
		{[]string{}, 0, true},
		{[]string{""}, 0, true},
		{[]string{"Send", "Read"}, 0, true},
		{[]string{"EntityRead"}, 0, true},
		{[]string{"Send,Listen"}, 0, true}, // the caller splits lists
	}
	for _, tt := range tests {
		got, err := ParseRights(tt.names)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalidRights) {
				t.Errorf("ParseRights(%q) error = %v; want %v", tt.names, err, ErrInvalidRights)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRights(%q) = %q, %v; want %q, nil", tt.names, got, err, tt.want)
		}
	}
}

func TestParseRightsStringRoundTrip(t *testing.T) {
	for r := Rights(1); r <= Send|Listen|Manage; r++ {
		got, err := ParseRights(strings.Split(r.String(), ","))
		if err != nil || got != r {
			t.Errorf("ParseRights(%q) = %q, %v; want %q, nil", r.String(), got, err, r)
		}
	}
}
