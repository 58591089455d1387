package inbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestRunAtBadInput: the run times a publish refuses, and those it writes otherwise than as
// given, on each database's time form.
func TestRunAtBadInput(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	delayed := Table{Name: "jobs", ID: "id", IDGenerated: true, RetryAfter: "retry_after"}
	plain := Table{Name: "jobs", ID: "id", IDGenerated: true}
	y9999 := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) // nanoseconds past the column's last microsecond
	tests := []struct {
		name    string
		t       Table
		m       Message
		want    time.Time // zero: NULL, due at once
		refused string    // a part of the error; empty: accepted
	}{
		{"zero is not set", delayed, Message{}, time.Time{}, ""},
		{"ahead", delayed, Message{RunAt: now.Add(time.Hour)}, now.Add(time.Hour), ""},
		{"another zone", delayed, Message{RunAt: now.Add(time.Hour).In(time.FixedZone("x", 3600))}, now.Add(time.Hour), ""},
		{"nanoseconds truncated", delayed, Message{RunAt: now.Add(time.Hour + 1500)}, now.Add(time.Hour + 1000), ""},
		{"now is due at once", delayed, Message{RunAt: now}, time.Time{}, ""},
		{"far past is due at once", delayed, Message{RunAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}, time.Time{}, ""},
		{"year 9999, last microsecond", delayed, Message{RunAt: y9999}, y9999.Truncate(time.Microsecond), ""},
		{"year 10000", delayed, Message{RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, time.Time{}, "past the latest run time"},
		{"year 10000 in UTC, 9999 where it is written", delayed, Message{RunAt: time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("x", -3600))}, time.Time{}, "past the latest run time"},
		{"both Delay and RunAt", delayed, Message{Delay: time.Second, RunAt: now.Add(time.Hour)}, time.Time{}, "both Delay"},
		{"RunAt without the column", plain, Message{RunAt: now.Add(time.Hour)}, time.Time{}, "no RetryAfter column"},
		{"past RunAt without the column", plain, Message{RunAt: now.Add(-time.Hour)}, time.Time{}, "no RetryAfter column"},
	}
	for _, tc := range tests {
		got, err := runAfter(tc.t, tc.m, now)
		switch {
		case tc.refused != "":
			if err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.HasPrefix(err.Error(), "inbox: ") {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.refused)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !got.Equal(tc.want):
			t.Errorf("%s: retry_after %v, want %v", tc.name, got, tc.want)
		}
	}
	// Every database's form of the latest run time reads back as it: SQLite's text keeps its
	// fixed width (so it compares as text), the servers' a time to the microsecond.
	for _, d := range []dialect.Dialect{dialect.Postgres[isolation.Default]{}, dialect.SQLite[isolation.Default]{}} {
		back, err := dialect.ScannedTime(d.Time(y9999))
		if err != nil || !back.Equal(y9999.Truncate(time.Microsecond)) {
			t.Errorf("%s: year 9999 reads back as %v (%v)", d.Name(), back, err)
		}
	}
	lite := dialect.SQLite[isolation.Default]{}
	if s := lite.Time(y9999).(string); len(s) != len(dialect.SQLiteTimeLayout) || s <= lite.Time(now).(string) {
		t.Errorf("SQLite writes year 9999 as %q, not fixed-width text after %q", s, lite.Time(now))
	}
}

// TestRunAtRow: a publish writes a RunAt into retry_after in the database's form, and refuses
// the whole publish for one bad message.
func TestRunAtRow(t *testing.T) {
	d := dialect.SQLite[isolation.Default]{}
	tbl := Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", RetryAfter: "retry_after"}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	sts, err := statements(d, tbl, []Message{{RunAt: at}, {}}, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := sts[0].args; len(got) != 4 || got[1] != d.Time(at) || got[3] != nil {
		t.Errorf("args %v, want the run time in the first row's retry_after and NULL in the second's", got)
	}
	if _, err := statements(d, tbl, []Message{{RunAt: at}, {Delay: time.Second, RunAt: at}}, false, time.Now()); err == nil {
		t.Error("a publish with a message setting both Delay and RunAt was accepted")
	}
}

// TestRescheduleRefuses: Reschedule refuses, before any statement, the zero time, a time past
// year 9999 and a table without a RetryAfter column.
func TestRescheduleRefuses(t *testing.T) {
	d := dialect.SQLite[isolation.Default]{}
	with, err := NewClient(nil, d, Table{Name: "jobs", ID: "id", RetryAfter: "retry_after"})
	if err != nil {
		t.Fatal(err)
	}
	without, err := NewClient(nil, d, Table{Name: "jobs", ID: "id"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := with.Reschedule(ctx, 1, time.Time{}); err == nil || !strings.Contains(err.Error(), "zero time") {
		t.Errorf("the zero time: %v", err)
	}
	if err := with.Reschedule(ctx, 1, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "latest run time") {
		t.Errorf("year 10000: %v", err)
	}
	if err := without.Reschedule(ctx, 1, time.Now()); !errors.Is(err, ErrSchema) {
		t.Errorf("no RetryAfter column: %v, want ErrSchema", err)
	}
}
