package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vgarvardt/gue/v5"

	"github.com/sqlinbox/inbox/bench/harness"
)

// gueQueue drains gue jobs. Its fastest reasonable settings: a worker pool of w workers, each
// locking one job per transaction with SKIP LOCKED (gue's only way); the run-at poll strategy,
// whose ORDER BY run_at, priority the (queue, run_at, priority) index serves (the default
// priority strategy sorts every due row on each lock); a 10 ms poll interval, which only counts
// when a worker finds nothing; graceful shutdown so that the last job's delete commits.
type gueQueue struct {
	notOurs
	pool   *pgxpool.Pool
	client *gue.Client
}

func newGue(ctx context.Context, dsn string, maxW int) (contender, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = int32(maxW + 2) // each worker holds its job's transaction; the same pool as ours
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	client, err := harness.GueClient(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &gueQueue{pool: pool, client: client}, nil
}

func (g *gueQueue) name() string { return "gue" }
func (g *gueQueue) close()       { g.pool.Close() }

func (g *gueQueue) prefill(ctx context.Context, n int) error {
	if _, err := g.pool.Exec(ctx, "TRUNCATE gue_jobs"); err != nil {
		return err
	}
	for from := 0; from < n; from += 1000 {
		jobs := make([]*gue.Job, 0, 1000)
		for seq := from + 1; seq <= min(from+1000, n); seq++ {
			jobs = append(jobs, &gue.Job{Type: "bench", Args: harness.Payload(seq)})
		}
		if err := g.client.EnqueueBatch(ctx, jobs); err != nil {
			return err
		}
	}
	_, err := g.pool.Exec(ctx, "ANALYZE gue_jobs")
	return err
}

func (g *gueQueue) drain(ctx context.Context, n, w int) (time.Duration, error) {
	var handled atomic.Int64
	all := make(chan struct{})
	wm := gue.WorkMap{"bench": func(ctx context.Context, j *gue.Job) error {
		if handled.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}}
	pool, err := gue.NewWorkerPool(g.client, wm, w,
		gue.WithPoolPollInterval(10*time.Millisecond),
		gue.WithPoolPollStrategy(gue.RunAtPollStrategy),
		gue.WithPoolGracefulShutdown(nil))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	run := harness.Start(ctx, pool)
	defer run.Stop()
	select {
	case <-all:
	case <-run.Done():
		return 0, fmt.Errorf("the worker pool stopped with %d of %d worked: %v", handled.Load(), n, run.Err())
	}
	if err := run.Stop(); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	var left int64
	if err := g.pool.QueryRow(ctx, "SELECT COUNT(*) FROM gue_jobs").Scan(&left); err != nil {
		return 0, err
	}
	if err := harness.Check("gue_jobs", left, handled.Load(), int64(n)); err != nil {
		return 0, err
	}
	return elapsed, nil
}
