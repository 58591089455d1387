package main

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/vgarvardt/gue/v5"
	"github.com/vgarvardt/gue/v5/adapter/pgxv5"

	"github.com/sqlinbox/inbox/bench/harness"
)

// publishArgs is River's job: the same payload as our rows.
type publishArgs struct {
	Seq         int    `json:"seq"`
	Account     string `json:"account"`
	AmountCents int    `json:"amount_cents"`
}

func (publishArgs) Kind() string { return "bench" }

// riverSchema keeps River's tables apart from everything else in the database (and from the
// peers command's).
const riverSchema = "inbox_bench_publish_river"

var quiet = slog.New(slog.DiscardHandler)

// openPool opens a pgx pool of 2 connections on dsn with schema first on its search path
// (created if missing), for a peer whose table names carry no schema.
func openPool(ctx context.Context, dsn, schema string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 2
	pc.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// riverPublisher publishes River jobs through an insert-only client (no queues, no workers),
// on pgx: InsertMany, which runs one INSERT … SELECT unnest(…) RETURNING in a transaction of
// its own, or with fast set InsertManyFast, which COPYs the rows in a transaction of its own
// (riverpgxv5). Both are all or nothing. Its single-message call is Insert (a transaction
// around the same INSERT of one row).
type riverPublisher struct {
	fast   bool
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
}

func newRiver(ctx context.Context, dsn string, fast bool) (contender, error) {
	pool, err := openPool(ctx, dsn, riverSchema)
	if err != nil {
		return nil, err
	}
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: riverSchema, Logger: quiet})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	var client *river.Client[pgx.Tx]
	if err == nil {
		client, err = river.NewClient(driver, &river.Config{Schema: riverSchema, Logger: quiet})
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &riverPublisher{fast: fast, pool: pool, client: client}, nil
}

func (r *riverPublisher) name() string {
	if r.fast {
		return "River: InsertManyFast (COPY)"
	}
	return "River: InsertMany (unnest)"
}

func (r *riverPublisher) role() role { return peerRole }
func (r *riverPublisher) close()     { r.pool.Close() }

func (r *riverPublisher) empty(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "TRUNCATE river_job")
	return err
}

func (r *riverPublisher) count(ctx context.Context) (int64, error) {
	var n int64
	err := r.pool.QueryRow(ctx, "SELECT COUNT(*) FROM river_job").Scan(&n)
	return n, err
}

// args is row seq's job arguments: Payload(seq) decoded, which River encodes again.
func args(seq int) publishArgs {
	var a publishArgs
	if err := json.Unmarshal(harness.Payload(seq), &a); err != nil {
		panic(err) // Payload writes this JSON
	}
	return a
}

func (r *riverPublisher) prepare(from, rows int) func(ctx context.Context) error {
	params := make([]river.InsertManyParams, rows)
	for i := range params {
		params[i] = river.InsertManyParams{Args: args(from + i + 1)}
	}
	if r.fast {
		return func(ctx context.Context) error {
			_, err := r.client.InsertManyFast(ctx, params)
			return err
		}
	}
	return func(ctx context.Context) error {
		_, err := r.client.InsertMany(ctx, params)
		return err
	}
}

func (r *riverPublisher) one(ctx context.Context, seq int) error {
	_, err := r.client.Insert(ctx, args(seq), nil)
	return err
}

// oneName names Insert for InsertMany's contender alone: the latency is measured once.
func (r *riverPublisher) oneName() string {
	if r.fast {
		return ""
	}
	return "River: Insert"
}

// gueSchema keeps gue's table apart from everything else in the database (and from the peers
// command's gue_jobs): gue names its table without a schema.
const gueSchema = "inbox_bench_publish_gue"

// gueMaxRows is the most jobs one EnqueueBatch takes: its one INSERT binds 8 values a job, and
// Postgres's protocol takes at most 65,535 (pgx refuses more before sending).
const gueMaxRows = 65535 / 8

// guePublisher publishes gue jobs by EnqueueBatch: one multi-row INSERT committed on its own. A
// call of more than gueMaxRows jobs, which EnqueueBatch refuses, is EnqueueBatchTx in even
// parts of at most gueMaxRows in one transaction of the caller's, what a user of gue has to
// write for all or nothing. Its single-message call is Enqueue (one INSERT).
type guePublisher struct {
	pool   *pgxpool.Pool
	client *gue.Client
}

func newGue(ctx context.Context, dsn string) (contender, error) {
	pool, err := openPool(ctx, dsn, gueSchema)
	if err != nil {
		return nil, err
	}
	client, err := harness.GueClient(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &guePublisher{pool: pool, client: client}, nil
}

func (g *guePublisher) name() string { return "gue: EnqueueBatch" }
func (g *guePublisher) role() role   { return peerRole }
func (g *guePublisher) close()       { g.pool.Close() }

func (g *guePublisher) empty(ctx context.Context) error {
	_, err := g.pool.Exec(ctx, "TRUNCATE gue_jobs")
	return err
}

func (g *guePublisher) count(ctx context.Context) (int64, error) {
	var n int64
	err := g.pool.QueryRow(ctx, "SELECT COUNT(*) FROM gue_jobs").Scan(&n)
	return n, err
}

func (g *guePublisher) prepare(from, rows int) func(ctx context.Context) error {
	jobs := make([]*gue.Job, rows)
	for i := range jobs {
		jobs[i] = &gue.Job{Type: "bench", Args: harness.Payload(from + i + 1)}
	}
	if rows <= gueMaxRows {
		return func(ctx context.Context) error { return g.client.EnqueueBatch(ctx, jobs) }
	}
	parts := (rows + gueMaxRows - 1) / gueMaxRows
	return func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, g.pool, func(tx pgx.Tx) error {
			for p := range parts {
				if err := g.client.EnqueueBatchTx(ctx, jobs[p*rows/parts:(p+1)*rows/parts], pgxv5.NewTx(tx)); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

func (g *guePublisher) oneName() string { return "gue: Enqueue" }

func (g *guePublisher) one(ctx context.Context, seq int) error {
	return g.client.Enqueue(ctx, &gue.Job{Type: "bench", Args: harness.Payload(seq)})
}
