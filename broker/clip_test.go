package broker_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sbgate/sbgate/broker"
)

// Clip is the one shortener of client input quoted in errors: short values pass whole, long ones
// keep 64 bytes and an ellipsis, and a cut never splits a multi-byte rune (the error would carry
// invalid UTF-8 into a JSON or XML answer).
func TestClip(t *testing.T) {
	if got := broker.Clip("short"); got != "short" {
		t.Errorf("Clip(short) = %q", got)
	}
	if got, want := broker.Clip(strings.Repeat("x", 1000)), strings.Repeat("x", 64)+"..."; got != want {
		t.Errorf("Clip(1000 x) = %q, want %q", got, want)
	}
	// A quoted value is text every answer can carry: no invalid UTF-8, no NUL.
	if got, want := broker.Clip("a\xffb\x00c"), "a\uFFFDb\uFFFDc"; got != want {
		t.Errorf("Clip(invalid) = %q, want %q", got, want)
	}
	for pad := 0; pad < 4; pad++ {
		s := strings.Repeat("a", pad) + strings.Repeat("€", 100) // 3 bytes a rune
		got := broker.Clip(s)
		if !utf8.ValidString(got) {
			t.Errorf("pad %d: Clip cut a rune: %q", pad, got)
		}
		if kept := strings.TrimSuffix(got, "..."); len(kept) > 64 || len(kept) < 62 || !strings.HasPrefix(s, kept) {
			t.Errorf("pad %d: Clip kept %d bytes %q", pad, len(kept), kept)
		}
	}
}
