package sqltext_test

import (
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/internal/sqltext"
)

// TestChannel: a short name keeps its name; a long one is cut to 63 bytes at a rune's start,
// and two long names that share their first 54 bytes still differ.
func TestChannel(t *testing.T) {
	if got := sqltext.Channel("jobs"); got != "inbox.jobs" {
		t.Errorf("Channel(jobs) = %q, want inbox.jobs", got)
	}
	long := strings.Repeat("é", 40) // 80 bytes
	a, b := sqltext.Channel(long+"a"), sqltext.Channel(long+"b")
	for _, c := range []string{a, b} {
		if len(c) > 63 || !strings.HasPrefix(c, "inbox.éé") || c != strings.ToValidUTF8(c, "") {
			t.Errorf("Channel of a long name = %q (%d bytes), want at most 63 valid bytes", c, len(c))
		}
	}
	if a == b {
		t.Errorf("two long names share the channel %q", a)
	}
}
