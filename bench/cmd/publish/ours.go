package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/internal/schema"
)

// oursPublisher publishes through inbox.Enqueue, over database/sql (pgx's stdlib driver on
// Postgres, as the harness opens it), into one of two tables: the bench table the throughput
// command drains (an id and a payload: one bound value a row), or a job table as the README
// prints it (schema.Create: queue, kind, priority, retry_after, created_at, dead_at and
// last_error beside the payload, and the claim index), whose rows carry what a peer's do. A call
// of up to 1,000 rows is one INSERT committed on its own; a larger one is an INSERT per 1,000 rows
// in one transaction.
type oursPublisher struct {
	label   string
	variant string // the driver setting of a variant of ours (variantRole); empty for ours
	t       *harness.Target
	tbl     inbox.Table
	// trips, when the target counts them, is what the last measured call sequence sent.
	trips harness.TripCounts
}

// jobTable is the job table's description: the columns a peer's job row carries.
func jobTable(name string) inbox.Table {
	return inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		Queue: "queue", Kind: "kind", Priority: "priority", RetryAfter: "retry_after", CreatedAt: "created_at",
		DeadAt: "dead_at", LastError: "last_error"}
}

// newOurs opens database db at dsn and creates ours' table: the job table with job set, the
// bench table otherwise. A variant names the driver setting its dsn adds, and has tables of its
// own.
func newOurs(ctx context.Context, db, dsn string, job, countTrips bool, variant string) (*oursPublisher, error) {
	open := harness.Open
	if countTrips {
		open = harness.OpenCounting
	}
	t, err := open(ctx, db, dsn, 2)
	if err != nil {
		return nil, err
	}
	o := &oursPublisher{label: "ours: Enqueue, bench table", variant: variant, t: t, tbl: harness.Table("inbox_publish_bench")}
	if job {
		o.label, o.tbl = "ours: Enqueue, job table", jobTable("inbox_publish_jobs")
	}
	if variant != "" {
		o.label += ", " + variant
		o.tbl.Name += "_variant"
	}
	if job {
		err = createJobTable(ctx, t, o.tbl)
	} else {
		err = t.CreateTable(ctx, o.tbl.Name)
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("%s: %w", o.label, err)
	}
	return o, nil
}

// createJobTable drops and creates the job table tbl on t as the README prints it.
func createJobTable(ctx context.Context, t *harness.Target, tbl inbox.Table) error {
	ddl, err := schema.Create(t.D, tbl, "")
	if err != nil {
		return err
	}
	q, err := tbl.Quote(t.D)
	if err != nil {
		return err
	}
	for _, s := range append([]string{"DROP TABLE IF EXISTS " + q.Name}, ddl...) {
		if _, err := t.DB.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("creating table %s: %w", tbl.Name, err)
		}
	}
	return nil
}

func (o *oursPublisher) name() string { return o.label }
func (o *oursPublisher) role() role {
	if o.variant != "" {
		return variantRole
	}
	return oursRole
}
func (o *oursPublisher) close() { o.t.Close() }

func (o *oursPublisher) empty(ctx context.Context) error { return o.t.Empty(ctx, o.tbl.Name) }

func (o *oursPublisher) count(ctx context.Context) (int64, error) {
	return o.t.Remaining(ctx, o.tbl.Name)
}

// message is row seq's message: its payload, and in the job table a queue, a kind and a
// priority, as a peer's job carries.
func (o *oursPublisher) message(seq int) inbox.Message {
	m := inbox.Message{Payload: harness.Payload(seq)}
	if o.tbl.Queue != "" {
		m.Queue, m.Kind, m.Priority = "default", "bench", 1
	}
	return m
}

func (o *oursPublisher) prepare(from, rows int) func(ctx context.Context) error {
	msgs := make([]inbox.Message, rows)
	for i := range msgs {
		msgs[i] = o.message(from + i + 1)
	}
	return func(ctx context.Context) error {
		return inbox.Enqueue(ctx, o.t.DB, o.t.D, o.tbl, msgs...)
	}
}

func (o *oursPublisher) oneName() string {
	return strings.Replace(o.label, "Enqueue", "Enqueue of one message", 1)
}

func (o *oursPublisher) one(ctx context.Context, seq int) error {
	return inbox.Enqueue(ctx, o.t.DB, o.t.D, o.tbl, o.message(seq))
}

// snapshot is what the target counted so far; the zero counts where it counts nothing.
func (o *oursPublisher) snapshot() harness.TripCounts {
	if o.t.Trips == nil {
		return harness.TripCounts{}
	}
	return o.t.Trips.Snapshot()
}
