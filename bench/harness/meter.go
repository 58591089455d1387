package harness

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Traffic is what a window of a counting target's work sent (Meter): the wrapper's counts,
// and the server's own counters as a check of them.
type Traffic struct {
	Counted TripCounts
	Server  ServerCounts
}

// ServerCounts are a server's own counters. They count the whole server: another session's
// work on it is in them too.
type ServerCounts struct {
	// XIDs (Postgres) are the transaction ids the server assigned: one for each transaction
	// that changed or locked a row, committed or not. (pg_stat_database's xact_commit counts
	// read-only transactions too, and a backend reports it up to seconds late.)
	XIDs int64
	// Commits and Questions (MySQL, MariaDB) are the server's Com_commit (COMMIT statements;
	// a statement committed on its own is not one) and Questions (statements the clients sent,
	// prepares, statement closes and pings not counted).
	Commits, Questions int64
}

// Sub is what the server counted between b and c.
func (c ServerCounts) Sub(b ServerCounts) ServerCounts {
	return ServerCounts{XIDs: c.XIDs - b.XIDs, Commits: c.Commits - b.Commits, Questions: c.Questions - b.Questions}
}

// ServerCounts reads the server's counters; SQLite has none (zero).
func (t *Target) ServerCounts(ctx context.Context) (ServerCounts, error) {
	var c ServerCounts
	switch t.Name {
	case "postgres":
		// The next transaction id to assign; reading it assigns none.
		err := t.DB.QueryRowContext(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&c.XIDs)
		return c, err
	case "mysql", "mariadb":
		rows, err := t.DB.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Questions')")
		if err != nil {
			return c, err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name string
				n    int64
			)
			if err := rows.Scan(&name, &n); err != nil {
				return c, err
			}
			if strings.EqualFold(name, "Com_commit") {
				c.Commits = n
			} else {
				c.Questions = n
			}
		}
		return c, rows.Err()
	}
	return c, nil
}

// ServerBackground is what the server counted over d while this process sent it nothing but
// the two readings: the other sessions' share of a drain's server counts, per second of it.
func (t *Target) ServerBackground(ctx context.Context, d time.Duration) (ServerCounts, error) {
	before, err := t.ServerCounts(ctx)
	if err != nil {
		return before, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ServerCounts{}, ctx.Err()
	}
	after, err := t.ServerCounts(ctx)
	return after.Sub(before), err
}

// A Meter measures what a counting target (OpenCounting) sends over a window of its work.
type Meter struct {
	t       *Target
	counted TripCounts
	server  ServerCounts
}

// StartMeter starts a window of t's traffic. It returns a nil Meter, which measures nothing,
// when t counts nothing.
func (t *Target) StartMeter(ctx context.Context) (*Meter, error) {
	if t.Trips == nil {
		return nil, nil
	}
	// The server first and the wrapper after, and the other way round at Stop: the readings
	// of the server's counters are not in the wrapper's window.
	server, err := t.ServerCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the server's counters: %w", err)
	}
	return &Meter{t: t, counted: t.Trips.Snapshot(), server: server}, nil
}

// Stop ends the window and returns what it counted; a nil Meter's is zero.
func (m *Meter) Stop(ctx context.Context) (Traffic, error) {
	if m == nil {
		return Traffic{}, nil
	}
	counted := m.t.Trips.Snapshot().Sub(m.counted)
	server, err := m.t.ServerCounts(ctx)
	if err != nil {
		return Traffic{}, fmt.Errorf("reading the server's counters: %w", err)
	}
	return Traffic{Counted: counted, Server: server.Sub(m.server)}, nil
}

// Summary describes traffic per message of a drain of n rows on database db, for a log line:
// round trips, commits, the driver calls by kind, and the server's counters.
func (tr Traffic) Summary(db string, n int64) string {
	per := func(v int64) string { return fmt.Sprintf("%.3f", float64(v)/float64(n)) }
	c := tr.Counted
	var b strings.Builder
	fmt.Fprintf(&b, "%s round trips, %s commits (%s COMMITs, %s on their own, %s not waiting for the disk); calls:",
		per(c.RoundTrips()), per(c.AllCommits()), per(c.Commits), per(c.Autocommits), per(c.Unflushed))
	for k, v := range c.Calls {
		fmt.Fprintf(&b, " %s %s", Call(k), per(v))
	}
	switch db {
	case "postgres":
		fmt.Fprintf(&b, "; server: %s xids", per(tr.Server.XIDs))
	case "mysql", "mariadb":
		fmt.Fprintf(&b, "; server: %s Com_commit, %s Questions", per(tr.Server.Commits), per(tr.Server.Questions))
	}
	return b.String() + " (per message)"
}
