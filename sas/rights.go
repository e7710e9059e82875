package sas

import (
	"fmt"
	"strings"
)

// Rights is a set of claims granted by a shared access policy.
type Rights uint8

// The claims a policy may grant. Manage implies Send and Listen.
const (
	Send Rights = 1 << iota
	Listen
	Manage
)

// allRights lists the known rights in the order String uses (the order the Azure portal shows).
var allRights = [...]struct {
	r    Rights
	name string
}{
	{Manage, "Manage"},
	{Listen, "Listen"},
	{Send, "Send"},
}

// Has reports whether r grants every right in need. Manage implies Send and Listen, as in
// Service Bus. Has(0) is true.
func (r Rights) Has(need Rights) bool {
	if r&Manage != 0 {
		r |= Send | Listen
	}
	return r&need == need
}

// String returns the rights as a comma-separated list such as "Manage,Listen,Send", "None"
// for the empty set, and unknown bits in hex.
func (r Rights) String() string {
	if r == 0 {
		return "None"
	}
	var names []string
	for _, k := range allRights {
		if r&k.r != 0 {
			names = append(names, k.name)
			r &^= k.r
		}
	}
	if r != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint8(r)))
	}
	return strings.Join(names, ",")
}

// ClaimText returns the claim list Service Bus names in its "insufficient rights" 401 detail:
// "Send", "Listen" or "Manage,EntityRead" for a single right, as in
// "Unauthorized access. 'Send' claim(s) are required to perform this operation.".
// For a set it joins the texts of its members in the order Send, Listen, Manage; for the empty
// set it returns "".
func (r Rights) ClaimText() string {
	var parts []string
	if r&Send != 0 {
		parts = append(parts, "Send")
	}
	if r&Listen != 0 {
		parts = append(parts, "Listen")
	}
	if r&Manage != 0 {
		parts = append(parts, "Manage,EntityRead")
	}
	return strings.Join(parts, ",")
}

// ParseRights parses right names as written in configuration ("Send", "Listen", "Manage";
// case-insensitive, surrounding spaces ignored, repeats allowed).
//
// It returns an error wrapping [ErrInvalidRights] for an unknown name or an empty list: a
// policy that grants nothing is a configuration mistake, not a useful key.
func ParseRights(names []string) (Rights, error) {
	if len(names) == 0 {
		return 0, fmt.Errorf("%w: no rights given", ErrInvalidRights)
	}
	var r Rights
	for _, n := range names {
		found := false
		for _, k := range allRights {
			if strings.EqualFold(strings.TrimSpace(n), k.name) {
				r |= k.r
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("%w: unknown right %q (want Send, Listen or Manage)", ErrInvalidRights, n)
		}
	}
	return r, nil
}
