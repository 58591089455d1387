package admin

import (
	"context"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Schedule is a schedule of the table's periodic jobs (inbox.Periodic), as its row in the
// ticks table records it. The next tick is the one the process that took the last tick
// planned: only the code that defines the schedule can compute it anew.
type Schedule struct {
	Name string `json:"name"`
	// LastTick is the last tick taken; nil before the first.
	LastTick *time.Time `json:"last_tick"`
	// NextTick is the tick planned after it; nil where none was planned.
	NextTick *time.Time `json:"next_tick"`
	// JobID is the id of the job of the last tick that published one; 0 for none.
	JobID int64 `json:"job_id"`
}

// Schedules lists the schedules of the table's periodic jobs, by name, from its ticks table
// (inbox.TicksTable). A missing ticks table fails wrapping inbox.ErrSchema, with the statement
// that creates it (inbox.TicksSchema).
func (a *Admin) Schedules(ctx context.Context) ([]Schedule, error) {
	q, err := a.t.Quote(a.d)
	if err != nil {
		return nil, err
	}
	name := inbox.TicksTable(a.t.Name)
	quoted, err := a.d.Quote(name)
	if err != nil {
		return nil, sentinel.Errorf(inbox.ErrSchema, sentinel.Table(a.t.Name), "its ticks table's name: %v", err)
	}
	k := sqltext.New(a.d.Caps(), sqltext.Table(q)).Ticks(quoted)
	rows, err := a.db.QueryContext(ctx, k.List().SQL)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, sentinel.Errorf(inbox.ErrSchema, sentinel.Table(name), "reading the schedules of table %q: %v: where its periodic jobs run, create it: %s", a.t.Name, err, k.Create())
	}
	defer rows.Close()
	out := []Schedule{}
	for rows.Next() {
		var s Schedule
		var last, next int64
		if err := rows.Scan(&s.Name, &last, &next, &s.JobID); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(name), "reading the schedules: %w", err)
		}
		s.LastTick, s.NextTick = micros(last), micros(next)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(name), "reading the schedules: %w", err)
	}
	return out, nil
}

// micros is a tick kept in microseconds since the Unix epoch, in UTC; nil for 0, none.
func micros(us int64) *time.Time {
	if us == 0 {
		return nil
	}
	t := time.UnixMicro(us).UTC()
	return &t
}
