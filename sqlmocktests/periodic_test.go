package sqlmocktests

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
)

// tickColumns are the columns the ticks table's read returns.
var tickColumns = []string{"last_tick", "next_tick", "job_id"}

// runPeriodic runs p until the mock's expectations are met (or 5 s pass), then stops it.
func runPeriodic(t *testing.T, m *recorder, p *inbox.Periodic) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); m.mock.ExpectationsWereMet() != nil && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestPeriodicTickStatements pins a tick's statement sequence: the ticks table checked, the
// schedule's row read, then in one transaction the compare-and-set of its last tick, the job's
// INSERT that hands back its id, and the id recorded; then the row read again, the next tick
// not due. A compare-and-set that changes no row (another process took the tick) rolls back
// and publishes nothing.
func TestPeriodicTickStatements(t *testing.T) {
	sh := goldenShape("no-attempt")
	for _, c := range []dbCase{onPostgres, onMySQL} {
		for _, lost := range []bool{false, true} {
			name := c.name
			if lost {
				name += ", the tick taken by another process"
			}
			t.Run(name, func(t *testing.T) {
				ticks := goldenSQL(t, "ticks", c.db, sh)
				insert := goldenSQL(t, "publish", c.db, sh).of("insertID")
				hour := time.Now().Truncate(time.Hour)
				last, tick, next := hour.Add(-time.Hour).UnixMicro(), hour.UnixMicro(), hour.Add(time.Hour).UnixMicro()

				m := newRecorder(t, 0)
				m.mock.ExpectQuery(ticks.of("probe")).WillReturnRows(sqlmock.NewRows([]string{"name", "last_tick", "next_tick", "job_id"}))
				m.mock.ExpectQuery(ticks.of("read")).WithArgs("hourly").WillReturnRows(sqlmock.NewRows(tickColumns).AddRow(last, tick, int64(7)))
				m.mock.ExpectBegin()
				if lost {
					m.mock.ExpectExec(ticks.of("take")).WithArgs(tick, next, "hourly", last).WillReturnResult(sqlmock.NewResult(0, 0))
					m.mock.ExpectRollback()
				} else {
					m.mock.ExpectExec(ticks.of("take")).WithArgs(tick, next, "hourly", last).WillReturnResult(sqlmock.NewResult(0, 1))
					if c.db == "postgres" {
						m.mock.ExpectQuery(insert).WithArgs([]byte("hourly"), "", 0, nil, nil).WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(41)))
					} else {
						m.mock.ExpectExec(insert).WithArgs([]byte("hourly"), "", 0, nil, nil).WillReturnResult(sqlmock.NewResult(41, 1))
					}
					m.mock.ExpectExec(ticks.of("set job")).WithArgs(int64(41), "hourly").WillReturnResult(sqlmock.NewResult(0, 1))
					m.mock.ExpectCommit()
				}
				m.mock.ExpectQuery(ticks.of("read")).WithArgs("hourly").WillReturnRows(sqlmock.NewRows(tickColumns).AddRow(tick, next, int64(41)))

				p := inbox.NewPeriodic(m.db, c.d, sh.table, nil)
				if err := p.Add(inbox.PeriodicJob{Name: "hourly", Schedule: inbox.Every(time.Hour), Message: func(at time.Time) inbox.Message {
					if !at.Equal(hour) {
						t.Errorf("the job of tick %v; want %v", at, hour)
					}
					return inbox.Message{Payload: []byte("hourly")}
				}}); err != nil {
					t.Fatal(err)
				}
				runPeriodic(t, m, p)
			})
		}
	}
}

// TestPeriodicScheduleStops checks a schedule whose Next stops advancing after its
// registration: Run logs it at ERROR once and stops that schedule, writing nothing, and goes
// on until its context ends.
func TestPeriodicScheduleStops(t *testing.T) {
	sh := goldenShape("no-attempt")
	c := onPostgres
	ticks := goldenSQL(t, "ticks", c.db, sh)
	cutoff := time.Now().Add(-time.Minute)
	m := newRecorder(t, 0)
	m.mock.ExpectQuery(ticks.of("probe")).WillReturnRows(sqlmock.NewRows([]string{"name", "last_tick", "next_tick", "job_id"}))
	m.mock.ExpectQuery(ticks.of("read")).WithArgs("stuck").WillReturnRows(sqlmock.NewRows(tickColumns).AddRow(cutoff.Add(-time.Hour).UnixMicro(), int64(0), int64(0)))

	var log inboxtest.Log
	p := inbox.NewPeriodic(m.db, c.d, sh.table, &inbox.PeriodicConfig{Logger: log.Logger(slog.LevelInfo)})
	stuck := scheduleFunc(func(t time.Time) time.Time {
		if t.Before(cutoff) {
			return t // before the cutoff, it does not advance
		}
		return t.Add(time.Second)
	})
	if err := p.Add(inbox.PeriodicJob{Name: "stuck", Schedule: stuck, Message: func(time.Time) inbox.Message { return inbox.Message{} }}); err != nil {
		t.Fatal(err)
	}
	runPeriodic(t, m, p)
	if n := strings.Count(log.String(), "level=ERROR"); n != 1 || !log.Contains("a schedule stopped") || !log.Contains(`schedule \"stuck\"`) {
		t.Errorf("the log; want one ERROR naming the schedule that stopped:\n%s", log.String())
	}
}

type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }
