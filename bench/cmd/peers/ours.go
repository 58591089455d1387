package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// oursForm drains a bench table through this library's consumer, as the throughput command
// does (harness.DrainLibrary), on a pool of its own. With a batch above 1 the consumer is a
// batch consumer, handing the handler up to that many rows a call. Its drain is timed as the
// peers' are: Run's whole time, from its start to its return.
type oursForm struct {
	form  string
	size  int // rows a handler call takes: 1, or above 1 for a batch consumer
	t     *harness.Target
	table string
}

// newOurs opens database db at dsn (for SQLite, a file path) for form with batch size batch,
// and creates its table.
func newOurs(ctx context.Context, db, dsn, form string, batch, maxW int) (*oursForm, error) {
	t, err := harness.Open(ctx, db, dsn, maxW+2)
	if err != nil {
		return nil, err
	}
	o := &oursForm{form: form, size: batch, t: t, table: "inbox_peers_" + form + "_" + strconv.Itoa(batch)}
	if err := t.CreateTable(ctx, o.table); err != nil {
		t.Close()
		return nil, fmt.Errorf("ours (%s): %w", form, err)
	}
	return o, nil
}

func (o *oursForm) ours() bool { return true }
func (o *oursForm) batch() int { return o.size }
func (o *oursForm) close()     { o.t.Close() }

func (o *oursForm) name() string {
	if o.size > 1 {
		return fmt.Sprintf("ours: %s, batches of %d", o.form, o.size)
	}
	return "ours: " + o.form
}

func (o *oursForm) prefill(ctx context.Context, n int) error {
	return o.t.Prefill(ctx, o.table, n)
}

func (o *oursForm) drain(ctx context.Context, n, w int) (time.Duration, error) {
	// The pool is the workers plus two, as in the throughput command.
	o.t.SetPool(w + 2)
	round, err := harness.DrainLibrary(ctx, o.t, harness.Consumer{
		Form: o.form, Table: o.table, Workers: w, Batch: o.size, Poll: 100 * time.Millisecond,
	}, int64(n))
	if err != nil {
		return 0, err
	}
	return round.Wall, nil
}
