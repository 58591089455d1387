package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

const demoHead = `Publishes messages to a table of its own, drains them with a consumer of the lease form, and
checks the table's count against the handlers'. It says where it creates its table, creates it
only where no table of that name exists (replacing one an earlier demo left behind), marks it as
the demo's, and drops it when it ends; a table of that name it did not create is left alone.`

// job is the demo's payload.
type job struct {
	Seq     int    `json:"seq"`
	Account string `json:"account"`
}

func demo(ctx context.Context, s *session, args []string) (err error) {
	fs := s.flags("demo", demoHead)
	n := fs.Int("n", 5000, "messages to publish")
	workers := fs.Int("workers", 4, "handlers running at once")
	failEvery := fs.Int("fail-every", 20, "every k-th message fails its first attempt and is retried (0: none fail)")
	table := fs.String("table", "inbox_demo", "the table the demo creates, fills and drops")
	dsn := dsnFlag(fs, "a new SQLite file in a temporary directory")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *n < 1 || *workers < 1 || *failEvery < 0 {
		return usagef("-n and -workers must be at least 1, and -fail-every at least 0")
	}
	t, ok, err := s.target(*dsn)
	if err != nil {
		return err
	}
	if !ok {
		dir, err := os.MkdirTemp("", "inbox-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if t, err = parseDSN(filepath.Join(dir, "inbox-demo.db")); err != nil {
			return err
		}
	}
	db, err := open(ctx, t, *workers+2, createFile)
	if err != nil {
		return err
	}
	defer db.Close()
	from := ""
	if t.fromEnv {
		from = " (from $INBOX_DSN)"
	}
	fmt.Fprintf(s.stdout, "database  %s at %s%s\n", t.dialect.Name(), t.shown, from)

	owned, err := newDemoOwned(db, t.dialect, *table)
	if err != nil {
		return err
	}
	if err := owned.create(ctx, s.stdout, t.shown); err != nil {
		return err
	}
	defer func() {
		// The table goes even when the demo was interrupted: its context is done by then.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		switch dropErr := owned.drop(ctx, s.stdout); {
		case dropErr == nil:
		case err == nil:
			err = dropErr
		default:
			fmt.Fprintf(s.stderr, "inbox demo: %v\n", dropErr)
		}
	}()
	return drain(ctx, s, db, t, *table, *n, *workers, *failEvery)
}

// drain publishes n jobs to table and drains them, printing the progress and the outcome.
func drain(ctx context.Context, s *session, db *sql.DB, t target, table string, n, workers, failEvery int) error {
	fmt.Fprintf(s.stdout, "consumer  lease form, %d workers\n", workers)
	start := time.Now()
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{Seq: i + 1, Account: fmt.Sprintf("acct-%d", i%50)}
	}
	if err := publishJobs(ctx, db, t.dialect, table, jobs); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "published %d messages in %s\n", n, time.Since(start).Round(time.Millisecond))

	var acked, retried atomic.Int64
	logger := slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := demoConsumer(db, t.dialect, table, workers, logger, func(j job, attempt int) bool {
		if failEvery > 0 && j.Seq%failEvery == 0 && attempt == 1 {
			retried.Add(1)
			return false
		}
		acked.Add(1)
		return true
	})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	start = time.Now()
	go func() { errc <- c.Run(runCtx) }()

	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for acked.Load() < int64(n) {
		select {
		case err := <-errc:
			return fmt.Errorf("the consumer stopped: %w", err)
		case <-ctx.Done():
			stop()
			<-errc
			fmt.Fprintln(s.stdout)
			return ctx.Err()
		case <-ticker.C:
			progress(s.stdout, acked.Load(), int64(n), time.Since(start))
		}
	}
	elapsed := time.Since(start)
	progress(s.stdout, acked.Load(), int64(n), elapsed)
	fmt.Fprintln(s.stdout)
	stop()
	if err := <-errc; err != nil {
		return err
	}

	quoted, err := t.dialect.Quote(table)
	if err != nil {
		return err
	}
	var processed, attempts int64
	summary := "SELECT COUNT(*), COALESCE(SUM(attempt), 0) FROM " + quoted + " WHERE processed_at IS NOT NULL"
	if err := db.QueryRowContext(ctx, summary).Scan(&processed, &attempts); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "\nmessages  %d processed (the table says %d)\n", acked.Load(), processed)
	fmt.Fprintf(s.stdout, "rate      %.0f msg/s over %s\n", float64(acked.Load())/elapsed.Seconds(), elapsed.Round(time.Millisecond))
	fmt.Fprintf(s.stdout, "attempts  %d in all (the table's attempt column), %d retries\n", attempts, retried.Load())
	if processed != int64(n) || attempts != int64(n)+retried.Load() {
		return fmt.Errorf("the table disagrees with the handlers: %d processed, %d attempts; want %d and %d", processed, attempts, n, int64(n)+retried.Load())
	}
	return nil
}

// progress redraws one line: a bar, the count and the rate so far.
func progress(w io.Writer, done, total int64, elapsed time.Duration) {
	const width = 30
	filled := int(done * width / total)
	rate := float64(done) / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "\rdraining  [%s%s] %d/%d  %.0f msg/s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, rate)
}
