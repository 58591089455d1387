package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// oursForm drains a table through this library's consumer, as the inbox bench command does:
// the table has an id, a payload, an attempt and the lease column; Ack deletes the row. With a
// size above 1 the consumer is a batch consumer, handing the handler up to size rows a call.
type oursForm struct {
	form string
	size int // rows a handler call takes: 1, or above 1 for a batch consumer
	d    dialect.Runtime
	db   *sql.DB
	tbl  inbox.Table
}

func newOursPostgres(ctx context.Context, dsn, form string, batch, maxW int) (*oursForm, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	return newOurs(ctx, db, "postgres", form, batch, maxW,
		"(id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, locked_until TIMESTAMPTZ)")
}

func newOursSQLite(ctx context.Context, path string, batch, maxW int) (*oursForm, error) {
	db, err := sql.Open("sqlite", sqliteSource(path))
	if err != nil {
		return nil, err
	}
	return newOurs(ctx, db, "sqlite", "lease", batch, maxW,
		"(id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, locked_until TEXT)")
}

func newOurs(ctx context.Context, db *sql.DB, name, form string, batch, maxW int, columns string) (*oursForm, error) {
	db.SetMaxOpenConns(maxW + 2)
	db.SetMaxIdleConns(maxW + 2)
	d, err := dialect.Parse(name, "")
	if err != nil {
		db.Close()
		return nil, err
	}
	o := &oursForm{form: form, size: batch, d: d, db: db,
		tbl: inbox.Table{Name: "inbox_peers_" + form + "_" + strconv.Itoa(batch), ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt"}}
	q, _ := d.Quote(o.tbl.Name)
	for _, s := range []string{"DROP TABLE IF EXISTS " + q, "CREATE TABLE " + q + " " + columns} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, fmt.Errorf("ours (%s on %s): %w", form, name, err)
		}
	}
	return o, nil
}

func (o *oursForm) ours() bool { return true }
func (o *oursForm) batch() int { return o.size }
func (o *oursForm) close()     { o.db.Close() }

func (o *oursForm) name() string {
	if o.size > 1 {
		return fmt.Sprintf("ours: %s, batches of %d", o.form, o.size)
	}
	return "ours: " + o.form
}

func (o *oursForm) prefill(ctx context.Context, n int) error {
	q, _ := o.d.Quote(o.tbl.Name)
	empty := "TRUNCATE TABLE " + q
	if o.d.Name() == "sqlite" {
		empty = "DELETE FROM " + q
	}
	if _, err := o.db.ExecContext(ctx, empty); err != nil {
		return err
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for from := 0; from < n; from += 1000 {
		rows := min(1000, n-from)
		var b strings.Builder
		b.WriteString("INSERT INTO " + q + " (payload) VALUES ")
		args := make([]any, rows)
		for i := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + o.d.Placeholder(i+1) + ")")
			args[i] = payloadOf(from + i + 1)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = o.db.ExecContext(ctx, "ANALYZE "+q)
	return err
}

func (o *oursForm) drain(ctx context.Context, n, w int) (time.Duration, error) {
	var f inbox.BatchForm
	if o.form == "rowlock" {
		f = rowlock.New(o.d, o.tbl)
	} else {
		f = lease.New(o.d, o.tbl, &lease.Config{})
	}
	var handled atomic.Int64
	all := make(chan struct{})
	// handle counts k rows handled; the drain ends once n have been (more are a redelivery, which
	// the drain check reports).
	handle := func(k int) {
		if now := handled.Add(int64(k)); now >= int64(n) && now-int64(k) < int64(n) {
			close(all)
		}
	}
	// The pool is the workers plus two, as in the inbox bench command.
	o.db.SetMaxOpenConns(w + 2)
	o.db.SetMaxIdleConns(w + 2)
	cfg := &inbox.Config{Workers: w, PollInterval: 100 * time.Millisecond}
	var c *inbox.Consumer
	if o.size == 1 {
		c = inbox.NewConsumer(o.db, f, inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			handle(1)
			return outcome.Ack()
		}), cfg)
	} else {
		c = inbox.NewBatchConsumer(o.db, f, o.size, inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
			handle(len(ds))
			acks := make([]outcome.Outcome, len(ds))
			for i := range acks {
				acks[i] = outcome.Ack()
			}
			return acks
		}), cfg)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- c.Run(runCtx) }()
	select {
	case <-all:
	case err := <-errc:
		return 0, fmt.Errorf("the consumer stopped with %d of %d handled: %v", handled.Load(), n, err)
	}
	stop()
	if err := <-errc; err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	q, _ := o.d.Quote(o.tbl.Name)
	var left int
	if err := o.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q).Scan(&left); err != nil {
		return 0, err
	}
	if left != 0 || handled.Load() != int64(n) {
		return 0, fmt.Errorf("drain check failed: %d rows left, %d handled of %d", left, handled.Load(), n)
	}
	return elapsed, nil
}
