package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
)

// leaseTime matches a bound timestamp within a few seconds of want (the form reads the host
// clock, so a test can only bracket it): a time.Time, or on SQLite the fixed-width text. It
// records the value it matched in into, when into is set, for leaseSame to compare later
// arguments with.
type leaseTime struct {
	want time.Time
	into *driver.Value
}

func (a leaseTime) Match(v driver.Value) bool {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case string:
		var err error
		if t, err = time.Parse(dialect.SQLiteTimeLayout, v); err != nil {
			return false
		}
	default:
		return false
	}
	if d := t.Sub(a.want); d <= -5*time.Second || d >= 5*time.Second {
		return false
	}
	if a.into != nil {
		*a.into = v
	}
	return true
}

// leaseSame matches exactly the value an earlier leaseTime recorded: the token the form holds.
type leaseSame struct{ v *driver.Value }

func (a leaseSame) Match(v driver.Value) bool {
	if t, ok := v.(time.Time); ok {
		want, ok := (*a.v).(time.Time)
		return ok && t.Equal(want)
	}
	return *a.v != nil && v == *a.v
}

// openLease expects the lease form's Open over the jobs table with statements st (expectOpen),
// and opens a form of case c on the mock with no queue name.
func openLease(t *testing.T, m *recorder, c leaseCase, st leaseStatements) *lease.Form[dialect.Dialect] {
	t.Helper()
	expectOpen(m, c, st, "jobs")
	f := lease.New(c.d, leaseJobs, nil)
	if _, err := f.Open(context.Background(), m.db, inbox.Queue{}); err != nil {
		t.Fatal(err)
	}
	return f
}
