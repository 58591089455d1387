package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// publishers publish in the sustained scenario, each a batch of publishBatch rows at a time
// through the library (inbox.Enqueue: one INSERT, and a wake for the consumer).
const publishers, publishBatch = 2, 50

// sample is one sampling interval of the sustained run.
type sample struct {
	at                  time.Duration // since the start, at the interval's end
	consumed, published float64       // rows per second over the interval
	backlog             int64         // rows published and not yet handled
	server              string        // what the server says of the table, as table cells
}

// runSustained runs publishers and one consumer together for cfg.sustainFor: the publishers as
// fast as they can while fewer than cfg.backlog rows wait, the consumer draining. Every
// cfg.sample it reads the rates, the backlog and what the server says of the table (Postgres:
// live and dead tuples, size, autovacuum runs; MariaDB: InnoDB's history list, the undo not yet
// purged). At the end the publishers stop, the consumer drains what is left, and every row
// published must have been handled once.
func runSustained(ctx context.Context, cfg *config, t *harness.Target) error {
	const table = "scale_sustained"
	if err := t.CreateTable(ctx, table); err != nil {
		return err
	}
	pub, err := harness.Open(ctx, t.Name, t.DSN, publishers)
	if err != nil {
		return err
	}
	defer pub.Close()
	var handled, published atomic.Int64
	consumer, err := harness.Consumer{Form: cfg.sustainForm, Table: table, Workers: cfg.workers, Batch: cfg.sustainBatch,
		Poll: cfg.poll, Handle: func([]byte) { handled.Add(1) }}.Build(t)
	if err != nil {
		return err
	}
	run := harness.Start(ctx, consumer)
	defer run.Stop()

	pubCtx, stopPublishers := context.WithTimeout(ctx, cfg.sustainFor)
	defer stopPublishers()
	var wg sync.WaitGroup
	pubErrs := make([]error, publishers)
	for p := range publishers {
		wg.Go(func() {
			payloads := make([][]byte, publishBatch)
			for pubCtx.Err() == nil {
				if published.Load()-handled.Load() >= int64(cfg.backlog) {
					time.Sleep(time.Millisecond)
					continue
				}
				for i := range payloads {
					payloads[i] = harness.Payload(i + 1)
				}
				// Not pubCtx: a batch its deadline cut off might have landed uncounted.
				if err := harness.Enqueue(ctx, pub, table, payloads...); err != nil {
					pubErrs[p] = err
					stopPublishers()
					return
				}
				published.Add(publishBatch)
			}
		})
	}

	var samples []sample
	start := time.Now()
	lastHandled, lastPublished, lastAt := int64(0), int64(0), start
	tick := time.NewTicker(cfg.sample)
	defer tick.Stop()
	header, stat := serverStats(t, table)
sampling:
	for {
		select {
		case <-tick.C:
		case <-pubCtx.Done():
			break sampling
		case <-run.Done():
			stopPublishers()
			wg.Wait()
			return fmt.Errorf("the consumer stopped: %v", run.Err())
		}
		now, h, p := time.Now(), handled.Load(), published.Load()
		s := sample{at: now.Sub(start).Round(time.Second), backlog: p - h,
			consumed: float64(h-lastHandled) / now.Sub(lastAt).Seconds(), published: float64(p-lastPublished) / now.Sub(lastAt).Seconds()}
		s.server = stat(ctx)
		samples = append(samples, s)
		progress("%s sustained %s at %s: %.0f consumed/s, %.0f published/s, backlog %d, %s", t.Name, cfg.sustainForm, s.at, s.consumed, s.published, s.backlog, s.server)
		lastHandled, lastPublished, lastAt = h, p, now
	}
	wg.Wait()
	if err := errors.Join(pubErrs...); err != nil {
		return fmt.Errorf("publishing: %w", err)
	}
	// The publishers have stopped: the consumer drains the backlog.
	for deadline := time.Now().Add(time.Minute); handled.Load() < published.Load(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d rows published, %d handled a minute after the publishers stopped", published.Load(), handled.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := run.Stop(); err != nil {
		return err
	}
	if err := t.CheckDrained(ctx, table, handled.Load(), published.Load()); err != nil {
		return err
	}

	w := cfg.out
	fmt.Fprintf(w, "Sustained, %s: %s form, %d workers, batches of %d; %d publishers of %d rows an INSERT while fewer than %d rows wait; %s; %s rows published and handled\n\n",
		harness.Label(t.Name), cfg.sustainForm, cfg.workers, cfg.sustainBatch, publishers, publishBatch, cfg.backlog, cfg.sustainFor, harness.Thousands(float64(published.Load())))
	fmt.Fprintf(w, "| at | consumed msgs/s | published msgs/s | backlog | %s |\n|--:|--:|--:|--:|%s\n", header, strings.Repeat("--:|", strings.Count(header, "|")+1))
	for _, s := range samples {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", s.at, harness.Thousands(s.consumed), harness.Thousands(s.published), harness.Thousands(float64(s.backlog)), s.server)
	}
	if n := len(samples); n >= 2 {
		k := max(1, n/10)
		rates := func(ss []sample) []float64 {
			var r []float64
			for _, s := range ss {
				r = append(r, s.consumed)
			}
			return r
		}
		fmt.Fprintf(w, "\nConsumed msgs/s, median of the first %d samples: %s; of the last %d: %s\n", k, harness.Thousands(harness.Median(rates(samples[:k]))), k, harness.Thousands(harness.Median(rates(samples[n-k:]))))
	}
	fmt.Fprintln(w)
	return nil
}

// serverStats returns the table cells' header for what the server says of table, and a
// function that reads them.
func serverStats(t *harness.Target, table string) (string, func(context.Context) string) {
	switch t.Name {
	case "postgres":
		return "live tuples | dead tuples | table and indexes | autovacuums", func(ctx context.Context) string {
			var live, dead, size, vacuums int64
			err := t.DB.QueryRowContext(ctx, `SELECT n_live_tup, n_dead_tup, pg_total_relation_size(relid), autovacuum_count
				FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&live, &dead, &size, &vacuums)
			if err != nil {
				return "? | ? | ? | ?"
			}
			return fmt.Sprintf("%s | %s | %.1f MB | %d", harness.Thousands(float64(live)), harness.Thousands(float64(dead)), float64(size)/1e6, vacuums)
		}
	case "mysql", "mariadb":
		return "InnoDB history list", func(ctx context.Context) string {
			var n sql.NullInt64
			err := t.DB.QueryRowContext(ctx, "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'").Scan(&n)
			if err != nil || !n.Valid {
				return "?"
			}
			return harness.Thousands(float64(n.Int64))
		}
	}
	return "server", func(context.Context) string { return "–" }
}
