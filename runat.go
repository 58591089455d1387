package inbox

import (
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// latestRunAt is the latest run time a row takes (Message.RunAt, Reschedule): the last
// microsecond of year 9999, UTC, the end of MySQL's and MariaDB's DATETIME(6). Postgres's
// TIMESTAMPTZ reaches further, but SQLite keeps a time as fixed-width text, compared as text,
// whose four-digit year would sort a year 10000 before 2000; so the limit is the same on every
// database.
var latestRunAt = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)

// runAfter is the retry_after of m's row published at now: the zero time for none (NULL, due
// at once). A RunAt at or before now is due at once too, as a row published without one,
// rather than written as it is: its claim order is then a new row's (retry_after NULL sorts
// first, then by id), not ahead of every row due since, and a time before a column's range (a
// year 1 on MySQL) is never written. A RunAt is kept to the microsecond, truncated, as every
// time the library writes. It refuses a Delay beside a RunAt, either without the table's
// RetryAfter column, and a RunAt past latestRunAt.
func runAfter(t Table, m Message, now time.Time) (time.Time, error) {
	switch {
	case m.Delay > 0 && !m.RunAt.IsZero():
		return time.Time{}, sentinel.Errorf(nil, sentinel.Table(t.Name), "a Message sets both Delay (%v) and RunAt (%v): set one of them", m.Delay, m.RunAt)
	case m.Delay > 0 && t.RetryAfter == "":
		return time.Time{}, sentinel.Errorf(nil, "", "table %q has no RetryAfter column, so a Message cannot be delayed: add the column or publish without Delay", t.Name)
	case !m.RunAt.IsZero() && t.RetryAfter == "":
		return time.Time{}, sentinel.Errorf(nil, "", "table %q has no RetryAfter column, so a Message cannot be given a run time: add the column or publish without RunAt", t.Name)
	case m.Delay > 0:
		return now.Add(m.Delay), nil
	case m.RunAt.IsZero():
		return time.Time{}, nil
	}
	return runTime(t, "Message.RunAt", m.RunAt, now)
}

// runTime is the retry_after that run time at sets at now (see runAfter): the zero time where
// at is not after now; an error where it is past latestRunAt. what names the argument.
func runTime(t Table, what string, at, now time.Time) (time.Time, error) {
	at = at.UTC().Truncate(time.Microsecond)
	switch {
	case at.After(latestRunAt):
		return time.Time{}, sentinel.Errorf(nil, sentinel.Table(t.Name), "%s %v is past the latest run time a row takes, %v (the end of year 9999, which MySQL's DATETIME and SQLite's text keep): give an earlier time", what, at, latestRunAt)
	case !at.After(now):
		return time.Time{}, nil
	}
	return at, nil
}

// clockNow reads clock, or this host's where it is nil.
func clockNow(clock Clock) time.Time {
	if clock == nil {
		return time.Now()
	}
	return clock.Now()
}
