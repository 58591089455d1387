package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"maragu.dev/goqite"
	"maragu.dev/goqite/jobs"

	"github.com/sqlinbox/inbox/bench/harness"
)

// goqiteQueue drains goqite jobs through goqite's job runner (jobs.Runner), its documented way
// to run work from a queue. Its fastest reasonable settings: the runner's Limit (jobs at once)
// is the worker count; a 1 ms poll interval (goqite's README shows 10 ms); the pool its
// documentation recommends (-sqlite-pool, default 1). The runner receives one message at a
// time and runs each job in a goroutine of its own, which deletes the message once the job
// returns; while Limit jobs run it sleeps the poll interval before it receives again, so at one
// worker every message waits about that long (at 10 ms one worker drained about 70 a second).
// The drain ends when Start has returned, which waits for every job and its delete.
type goqiteQueue struct {
	notOurs
	db *sql.DB
	q  *goqite.Queue
}

// goqitePoll is the runner's poll interval.
const goqitePoll = time.Millisecond

// goqiteSchema is the table, trigger and index goqite needs on SQLite (goqite ships them as
// SQL, not as a Go call).
var goqiteSchema = []string{`create table if not exists goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict`, `create trigger if not exists goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end`, `create index if not exists goqite_queue_priority_created_idx on goqite (queue, priority desc, created)`}

func newGoqite(ctx context.Context, path string, pool int) (contender, error) {
	db, err := sql.Open("sqlite", harness.SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	for _, ddl := range goqiteSchema {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			db.Close()
			return nil, err
		}
	}
	return &goqiteQueue{db: db, q: goqite.New(goqite.NewOpts{DB: db, Name: "bench"})}, nil
}

func (g *goqiteQueue) name() string { return "goqite" }
func (g *goqiteQueue) close()       { g.db.Close() }

func (g *goqiteQueue) prefill(ctx context.Context, n int) error {
	if _, err := g.db.ExecContext(ctx, "DELETE FROM goqite"); err != nil {
		return err
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for seq := 1; seq <= n; seq++ {
		if _, err := jobs.CreateTx(ctx, tx, g.q, "bench", goqite.Message{Body: harness.Payload(seq)}); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (g *goqiteQueue) drain(ctx context.Context, n, w int) (time.Duration, error) {
	var handled atomic.Int64
	runCtx, stop := context.WithTimeout(ctx, 10*time.Minute)
	defer stop()
	r := jobs.NewRunner(jobs.NewRunnerOpts{Limit: w, Log: goqiteErrors{}, PollInterval: goqitePoll, Queue: g.q})
	r.Register("bench", func(ctx context.Context, m []byte) error {
		if handled.Add(1) == int64(n) {
			stop()
		}
		return nil
	})
	start := time.Now()
	r.Start(runCtx) // returns once runCtx is done and every job has run and deleted its message
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if handled.Load() < int64(n) {
		return 0, fmt.Errorf("%d of %d jobs run after 10 minutes", handled.Load(), n)
	}
	var left int64
	if err := g.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM goqite").Scan(&left); err != nil {
		return 0, err
	}
	if err := harness.Check("goqite", left, handled.Load(), int64(n)); err != nil {
		return 0, err
	}
	return elapsed, nil
}

// goqiteErrors prints the runner's errors to stderr: its logger has one level for every line,
// and a line per job run would cost the drain more than the job.
type goqiteErrors struct{}

func (goqiteErrors) Info(msg string, args ...any) {
	if strings.HasPrefix(msg, "Error") {
		fmt.Fprintln(os.Stderr, append([]any{"goqite:", msg}, args...)...)
	}
}
