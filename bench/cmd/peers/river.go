package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sqlinbox/inbox/bench/harness"
)

// benchArgs is River's job: the same payload as our rows.
type benchArgs struct {
	Seq         int    `json:"seq"`
	Account     string `json:"account"`
	AmountCents int    `json:"amount_cents"`
}

func (benchArgs) Kind() string { return "bench" }

type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	done func()
}

func (w *benchWorker) Work(ctx context.Context, job *river.Job[benchArgs]) error {
	w.done()
	return nil
}

// riverSchema keeps River's tables on Postgres apart from everything else in the database.
const riverSchema = "inbox_bench_river"

// riverQueue drains River jobs. Its fastest reasonable settings: the queue's MaxWorkers is the
// worker count, FetchCooldown at River's minimum (1 ms) so a producer with free workers fetches
// again at once, FetchPollInterval 50 ms, no job timeout, jobs inserted before the client
// starts (InsertMany: COPY on Postgres). Completion is River's own batched completer; the drain
// ends when Stop has returned, which waits for every completion to be written.
type riverQueue[TTx any] struct {
	notOurs
	label   string
	driver  riverdriver.Driver[TTx]
	schema  string
	closeDB func()
	// count reads the completed jobs; reset empties the job table.
	count func(ctx context.Context) (int, error)
	reset func(ctx context.Context) error
}

func newRiverPostgres(ctx context.Context, dsn string, maxW int) (contender, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	// The workers do not hold connections (River fetches and completes in batches); the pool
	// covers the producer, the completer, the notifier's LISTEN and leadership with room to spare.
	pc.MaxConns = int32(maxW + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+riverSchema); err != nil {
		pool.Close()
		return nil, err
	}
	r := &riverQueue[pgx.Tx]{label: "River", driver: riverpgxv5.New(pool), schema: riverSchema, closeDB: pool.Close}
	r.count = func(ctx context.Context) (int, error) {
		var n int
		err := pool.QueryRow(ctx, "SELECT COUNT(*) FROM "+riverSchema+".river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	r.reset = func(ctx context.Context) error {
		_, err := pool.Exec(ctx, "TRUNCATE "+riverSchema+".river_job")
		return err
	}
	if err := r.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return r, nil
}

func newRiverSQLite(ctx context.Context, path string, pool int) (contender, error) {
	db, err := sql.Open("sqlite", harness.SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(pool)
	r := &riverQueue[*sql.Tx]{label: "River", driver: riversqlite.New(db), closeDB: func() { db.Close() }}
	r.count = func(ctx context.Context) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	r.reset = func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, "DELETE FROM river_job")
		return err
	}
	if err := r.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

func (r *riverQueue[TTx]) migrate(ctx context.Context) error {
	m, err := rivermigrate.New(r.driver, &rivermigrate.Config{Schema: r.schema, Logger: quiet})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

var quiet = slog.New(slog.DiscardHandler)

func (r *riverQueue[TTx]) name() string { return r.label }
func (r *riverQueue[TTx]) close()       { r.closeDB() }

func (r *riverQueue[TTx]) prefill(ctx context.Context, n int) error {
	if err := r.reset(ctx); err != nil {
		return err
	}
	client, err := river.NewClient(r.driver, &river.Config{Schema: r.schema, Logger: quiet})
	if err != nil {
		return err
	}
	for from := 0; from < n; from += 1000 {
		params := make([]river.InsertManyParams, 0, 1000)
		for seq := from + 1; seq <= min(from+1000, n); seq++ {
			var a benchArgs
			if err := json.Unmarshal(harness.Payload(seq), &a); err != nil {
				return err
			}
			params = append(params, river.InsertManyParams{Args: a})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

func (r *riverQueue[TTx]) drain(ctx context.Context, n, w int) (time.Duration, error) {
	var handled atomic.Int64
	all := make(chan struct{})
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{done: func() {
		if handled.Add(1) == int64(n) {
			close(all)
		}
	}})
	client, err := river.NewClient(r.driver, &river.Config{
		Schema:            r.schema,
		Logger:            quiet,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: w}},
		Workers:           workers,
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: 50 * time.Millisecond,
		JobTimeout:        -1,
	})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		client.Stop(context.WithoutCancel(ctx))
		return 0, fmt.Errorf("%d of %d jobs worked after 10 minutes", handled.Load(), n)
	case <-ctx.Done():
		client.Stop(context.WithoutCancel(ctx))
		return 0, ctx.Err()
	}
	if err := client.Stop(ctx); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	done, err := r.count(ctx)
	if err != nil {
		return 0, err
	}
	if err := harness.Check("river_job (not completed)", int64(n-done), handled.Load(), int64(n)); err != nil {
		return 0, err
	}
	return elapsed, nil
}
