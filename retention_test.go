package inbox

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRetentionRefusesBadInput: Run refuses a Retention that cannot work, naming the field,
// before any pass: a negative age, size, interval or budget, no age at all, and an age whose
// column the table lacks (ErrSchema).
func TestRetentionRefusesBadInput(t *testing.T) {
	full := Table{Name: "jobs", ID: "id", ProcessedAt: "processed_at", DeadAt: "dead_at"}
	for _, tc := range []struct {
		name   string
		r      Retention
		table  Table
		schema bool   // the error wraps ErrSchema
		says   string // the error names this
	}{
		{"negative processed age", Retention{ProcessedAge: -time.Hour}, full, false, "ProcessedAge -1h0m0s"},
		{"negative dead age", Retention{ProcessedAge: time.Hour, DeadAge: -1}, full, false, "DeadAge -1ns"},
		{"negative batch", Retention{ProcessedAge: time.Hour, BatchSize: -1}, full, false, "BatchSize -1"},
		{"negative interval", Retention{ProcessedAge: time.Hour, Interval: -time.Second}, full, false, "Interval -1s"},
		{"negative budget", Retention{ProcessedAge: time.Hour, Budget: -time.Second}, full, false, "Budget -1s"},
		{"negative cancelled age", Retention{CancelledAge: -time.Minute}, full, false, "CancelledAge -1m0s"},
		{"no age", Retention{BatchSize: 10}, full, false, "set ProcessedAge, DeadAge or CancelledAge"},
		{"no cancelled_at", Retention{CancelledAge: time.Hour}, full, true, "CancelledAt column"},
		{"no processed_at", Retention{ProcessedAge: time.Hour}, Table{Name: "jobs", ID: "id", DeadAt: "dead_at"}, true, "ProcessedAt column"},
		{"no dead_at", Retention{DeadAge: time.Hour}, Table{Name: "jobs", ID: "id", ProcessedAt: "processed_at"}, true, "DeadAt column"},
		{"an age within the unique window", Retention{ProcessedAge: 2 * time.Hour, DeadAge: time.Hour}, Table{Name: "jobs", ID: "id", ProcessedAt: "processed_at", DeadAt: "dead_at", UniqueKey: "k", UniqueWindow: 90 * time.Minute}, false, "UniqueWindow (1h30m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Consumer{cfg: Config{Retention: &tc.r}}
			got, err := c.retention(tc.table)
			if err == nil {
				t.Fatalf("accepted %+v on %+v: %+v", tc.r, tc.table, got)
			}
			if errors.Is(err, ErrSchema) != tc.schema || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), `table "jobs"`) {
				t.Errorf("error %q: want ErrSchema %v, naming %q and the table", err, tc.schema, tc.says)
			}
		})
	}
}

// TestRetentionDefaults: a zero batch size, interval and budget take the named defaults, and a
// nil Retention is off.
func TestRetentionDefaults(t *testing.T) {
	tbl := Table{Name: "jobs", ID: "id", ProcessedAt: "processed_at"}
	c := &Consumer{cfg: Config{Retention: &Retention{ProcessedAge: time.Hour}}}
	got, err := c.retention(tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := Retention{ProcessedAge: time.Hour, BatchSize: DefaultRetentionBatch, Interval: DefaultRetentionInterval, Budget: DefaultRetentionBudget}
	if *got != want {
		t.Errorf("got %+v, want %+v", *got, want)
	}
	if off, err := (&Consumer{}).retention(tbl); off != nil || err != nil {
		t.Errorf("a nil Retention gave %+v, %v; want it off", off, err)
	}
}
