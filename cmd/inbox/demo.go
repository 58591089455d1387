package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// job is the demo's payload.
type job struct {
	Seq     int    `json:"seq"`
	Account string `json:"account"`
}

func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	n := fs.Int("n", 5000, "messages to publish")
	workers := fs.Int("workers", 4, "handlers running at once")
	dsn := fs.String("dsn", "", "database: postgres://…, mysql://user@tcp(host:port)/db, or a SQLite file path (default: a new SQLite file in a temporary directory)")
	failEvery := fs.Int("fail-every", 20, "every k-th message fails its first attempt and is retried (0: none fail)")
	fs.Parse(args)
	if *n < 1 || *workers < 1 {
		return fmt.Errorf("demo: -n and -workers must be at least 1")
	}

	if *dsn == "" {
		dir, err := os.MkdirTemp("", "inbox-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dsn = filepath.Join(dir, "inbox-demo.db")
	}
	db, d, err := openDSN(ctx, *dsn, *workers+2)
	if err != nil {
		return err
	}
	defer db.Close()

	table := inbox.Table{
		Name: "inbox_demo", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		ProcessedAt: "processed_at", Priority: "priority", RetryAfter: "retry_after",
	}
	if err := createTable(ctx, db, d, table.Name); err != nil {
		return fmt.Errorf("creating table %s: %w", table.Name, err)
	}
	fmt.Printf("database  %s (%s)\ntable     %s, lease form, %d workers\n", d.Name(), *dsn, table.Name, *workers)

	start := time.Now()
	jobs := make([]job, *n)
	for i := range jobs {
		jobs[i] = job{Seq: i + 1, Account: fmt.Sprintf("acct-%d", i%50)}
	}
	if err := inbox.EnqueueJSON(ctx, db, d, table, "", jobs...); err != nil {
		return err
	}
	fmt.Printf("published %d messages in %s\n", *n, time.Since(start).Round(time.Millisecond))

	var acked, retried atomic.Int64
	handler := inbox.JSON(func(ctx context.Context, dl *inbox.Delivery, j job) outcome.Outcome {
		if *failEvery > 0 && j.Seq%*failEvery == 0 && dl.Attempt == 1 {
			retried.Add(1)
			return outcome.Retry()
		}
		acked.Add(1)
		return outcome.Ack()
	})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	consumer := inbox.NewConsumer(db, lease.New(d, table, nil), handler, &inbox.Config{
		Workers: *workers, PollInterval: 100 * time.Millisecond, Logger: logger,
	})

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	start = time.Now()
	go func() { errc <- consumer.Run(runCtx) }()

	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for acked.Load() < int64(*n) {
		select {
		case err := <-errc:
			return fmt.Errorf("the consumer stopped: %w", err)
		case <-ctx.Done():
			stop()
			<-errc
			fmt.Println()
			return ctx.Err()
		case <-ticker.C:
			progress(acked.Load(), int64(*n), time.Since(start))
		}
	}
	elapsed := time.Since(start)
	progress(acked.Load(), int64(*n), elapsed)
	fmt.Println()
	stop()
	if err := <-errc; err != nil {
		return err
	}

	var processed, attempts int64
	const summary = "SELECT COUNT(*), COALESCE(SUM(attempt), 0) FROM inbox_demo WHERE processed_at IS NOT NULL"
	if err := db.QueryRowContext(ctx, summary).Scan(&processed, &attempts); err != nil {
		return err
	}
	fmt.Printf("\nmessages  %d processed (the table says %d)\n", acked.Load(), processed)
	fmt.Printf("rate      %.0f msg/s over %s\n", float64(acked.Load())/elapsed.Seconds(), elapsed.Round(time.Millisecond))
	fmt.Printf("attempts  %d in all (the table's attempt column), %d retries\n", attempts, retried.Load())
	if processed != int64(*n) || attempts != int64(*n)+retried.Load() {
		return fmt.Errorf("the table disagrees with the handlers: %d processed, %d attempts; want %d and %d", processed, attempts, *n, int64(*n)+retried.Load())
	}
	return nil
}

// progress redraws one line: a bar, the count and the rate so far.
func progress(done, total int64, elapsed time.Duration) {
	const width = 30
	filled := int(done * width / total)
	rate := float64(done) / max(elapsed.Seconds(), 1e-9)
	fmt.Printf("\rdraining  [%s%s] %d/%d  %.0f msg/s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, rate)
}
