package main

// This file holds the command's use of the library's API (the table's description, publishing,
// the consumer and its form), so that a change of that API changes this file only.

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// demoTable describes the demo's table, as demoDDL creates it.
func demoTable(name string) inbox.Table {
	return inbox.Table{
		Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		ProcessedAt: "processed_at", Priority: "priority", RetryAfter: "retry_after",
	}
}

// publishJobs publishes jobs to the demo's table, all or nothing.
func publishJobs(ctx context.Context, db *sql.DB, d dialect.Dialect, table string, jobs []job) error {
	return inbox.EnqueueJSON(ctx, db, d, demoTable(table), "", jobs...)
}

// A consumer drains a queue until its context ends.
type consumer interface {
	Run(ctx context.Context) error
}

// demoConsumer returns a consumer of the lease form over the demo's table, running workers
// handlers at once. handle tells whether a job's attempt (the first is 1) succeeded; one that
// did not is retried.
func demoConsumer(db *sql.DB, d dialect.Runtime, table string, workers int, logger *slog.Logger, handle func(j job, attempt int) bool) consumer {
	handler := inbox.JSON(func(ctx context.Context, dl *inbox.Delivery, j job) outcome.Outcome {
		if !handle(j, dl.Attempt) {
			return outcome.Retry()
		}
		return outcome.Ack()
	})
	return inbox.NewConsumer(db, lease.New(d, demoTable(table), nil), handler, &inbox.Config{
		Workers: workers, PollInterval: 100 * time.Millisecond, Logger: logger,
	})
}
