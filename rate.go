package inbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Rate is a rate limit of a queue, or of one kind of a queue: at most Starts of its rows are
// claimed in any window of Per, across every consumer and process (see docs/rates.md).
type Rate struct {
	// Queue is the queue's name; empty for the one queue of a table without a Queue column.
	Queue string `json:"queue"`
	// Kind is the kind whose rows the rate limits (Table.Kind); empty: every row of the queue.
	Kind string `json:"kind,omitempty"`
	// Starts is the number of rows claimed in any window of Per, at most; at least 1, and at most
	// MaxRateStarts.
	Starts int `json:"starts"`
	// Per is the window, a positive duration, counted in microseconds.
	Per time.Duration `json:"per"`
	// Recent is, as Rates reads it, the starts admitted in the last Per before the read.
	Recent int `json:"recent"`
}

// MaxRateStarts is the most starts a rate admits per interval: each is a row of the rates
// table (a start slot), which SetRate writes.
const MaxRateStarts = 100_000

// slotBatch is the number of slots one statement of SetRate adds.
const slotBatch = 100

// SetRate sets the rate r names (its queue, and its kind where it names one), or changes it:
// from its commit every claim of the lease form, in any process, admits at most r.Starts rows
// of the queue (of the kind) in any window of r.Per, each start counted at its claim, whether
// its handler then succeeds or not. Rows over the rate wait and are claimed as soon as the
// window lets them, and never hold back rows of other kinds or queues. Changing a rate takes
// effect at the next claim; the windows that began before the change hold by the old rate. (A
// rate lowered keeps the last starts of its first slots; one raised again within an interval
// admits the slots it adds at once.)
// The rates of a queue and of its kinds combine: a row is claimed only where each admits it.
//
// It fails where r.Starts is below 1 or above MaxRateStarts, r.Per is not a positive number of
// microseconds, r names a kind where the table has no Kind column or a queue other than empty
// where it has no Queue column, and wrapping ErrSchema where the description names no rates
// table, or the database has none (naming the statement that creates it).
func (c *Client[D]) SetRate(ctx context.Context, r Rate) error {
	w, err := c.rates("SetRate", r.Queue, r.Kind)
	if err != nil {
		return err
	}
	where := sentinel.Queue(c.t.Name, r.Queue)
	switch {
	case r.Starts < 1 || r.Starts > MaxRateStarts:
		return sentinel.Errorf(nil, where, "SetRate of %s: %d starts per interval: give between 1 and %d (ClearRate removes a rate)", rateName(r.Queue, r.Kind), r.Starts, MaxRateStarts)
	case r.Per < time.Microsecond:
		return sentinel.Errorf(nil, where, "SetRate of %s: an interval of %v: give a positive interval of at least a microsecond", rateName(r.Queue, r.Kind), r.Per)
	}
	v := rateValues(c.t.Name, r.Queue, r.Kind)
	v.Starts, v.For = r.Starts, r.Per.Microseconds()
	err = c.writeRates(ctx, func(tx dialect.Tx) error {
		reset := w.Reset()
		if _, err := tx.ExecContext(ctx, reset.SQL, reset.Bind(nil, &v)...); err != nil {
			return err
		}
		drop := w.DropSlots()
		v.Slot = r.Starts
		if _, err := tx.ExecContext(ctx, drop.SQL, drop.Bind(nil, &v)...); err != nil {
			return err
		}
		for from := 0; from < r.Starts; from += slotBatch {
			add := w.AddSlots(from, min(from+slotBatch, r.Starts))
			if _, err := tx.ExecContext(ctx, add.SQL, add.Bind(nil, &v)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return c.ratesFailed(ctx, "SetRate", w, err)
	}
	return nil
}

// ClearRate removes the rate of queue (of its kind, where kind is not empty): from its commit
// claims no longer limit it. Clearing a rate that is not there changes nothing. It fails as
// SetRate does.
func (c *Client[D]) ClearRate(ctx context.Context, queue, kind string) error {
	w, err := c.rates("ClearRate", queue, kind)
	if err != nil {
		return err
	}
	v := rateValues(c.t.Name, queue, kind)
	err = c.writeRates(ctx, func(tx dialect.Tx) error {
		clear := w.Clear()
		_, err := tx.ExecContext(ctx, clear.SQL, clear.Bind(nil, &v)...)
		return err
	})
	if err != nil {
		return c.ratesFailed(ctx, "ClearRate", w, err)
	}
	return nil
}

// Rates lists the table's rates, by queue and kind (the queue's own first), each with the
// starts admitted in its last interval (Rate.Recent), read on the client's clock
// (WithClock). It fails as SetRate does.
func (c *Client[D]) Rates(ctx context.Context) ([]Rate, error) {
	w, err := c.rates("Rates", "", "")
	if err != nil {
		return nil, err
	}
	list := w.List()
	now := time.Now()
	if c.clock != nil {
		now = c.clock.Now()
	}
	rows, err := c.db.QueryContext(ctx, list.SQL, list.Bind(nil, &sqltext.Values{Table: c.t.Name, NowUs: now.UnixMicro()})...)
	if err != nil {
		return nil, c.ratesFailed(ctx, "Rates", w, err)
	}
	defer rows.Close()
	out := []Rate{}
	for rows.Next() {
		var r Rate
		var scope string
		var per int64
		if err := rows.Scan(&r.Queue, &scope, &r.Kind, &r.Starts, &per, &r.Recent); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its rates: %w", err)
		}
		r.Per = time.Duration(per) * time.Microsecond
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its rates: %w", err)
	}
	return out, nil
}

// rateName names the rate of queue and kind in an error.
func rateName(queue, kind string) string {
	if kind == "" {
		return "the rate of queue " + strconv.Quote(queue)
	}
	return "the rate of kind " + strconv.Quote(kind) + " of queue " + strconv.Quote(queue)
}

// rateValues are the values that key the rate of queue and kind of the job table named table.
func rateValues(table, queue, kind string) sqltext.Values {
	v := sqltext.Values{Table: table, Queue: queue, Scope: sqltext.RateQueue, RateKey: ""}
	if kind != "" {
		v.Scope, v.RateKey = sqltext.RateKind, kind
	}
	return v
}

// writeRates runs write in a transaction: on SQLite under this process's writer lock, as
// publishing does.
func (c *Client[D]) writeRates(ctx context.Context, write func(dialect.Tx) error) error {
	if c.d.Caps().OneWriter {
		mu := sqlitewriter.For(c.db)
		mu.Lock()
		defer mu.Unlock()
	}
	tx, err := dialect.BeginWrite(ctx, c.d, c.db)
	if err != nil {
		return err
	}
	if err := write(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// rates is the builder of the statements over the description's rates table for call, over
// the rate of queue and kind; it fails, wrapping ErrSchema, where the description names no rates
// table, and where queue or kind names what the table has no column for.
func (c *Client[D]) rates(call, queue, kind string) (sqltext.Rates, error) {
	where := sentinel.Table(c.t.Name)
	switch {
	case c.t.Rates == "":
		return sqltext.Rates{}, sentinel.Errorf(ErrSchema, where, "%s needs a rates table, which the description does not name: set inbox.Table.Rates to inbox.RatesTable (%q) and create it with `inbox schema -rates -apply`", call, RatesTable)
	case c.t.Queue == "" && queue != "":
		return sqltext.Rates{}, sentinel.Errorf(nil, where, "%s of queue %q: the description has no Queue column, so the table is one queue: name it by the empty name", call, queue)
	case c.t.Kind == "" && kind != "":
		return sqltext.Rates{}, sentinel.Errorf(ErrSchema, where, "%s of kind %q: the description has no Kind column: name it in inbox.Table.Kind, or set the queue's rate", call, kind)
	case len(kind) > MaxGroupKey || len(queue) > MaxGroupKey:
		return sqltext.Rates{}, sentinel.Errorf(nil, where, "%s: a queue or kind name longer than %d bytes, which the rates table's key does not hold", call, MaxGroupKey)
	}
	q, err := c.t.Quote(c.d)
	if err != nil {
		return sqltext.Rates{}, err
	}
	return sqltext.New(c.d.Caps(), sqltext.Table(q)).Rates(), nil
}

// ratesFailed is the error of call, whose statement over the rates table failed with err: the
// connection's where it failed or the server answers none, otherwise ErrSchema naming the
// statement that creates the rates table where reading it fails too.
func (c *Client[D]) ratesFailed(ctx context.Context, call string, w sqltext.Rates, err error) error {
	return c.sideFailed(ctx, call, err, []string{w.Check().SQL}, func(checkErr error) error {
		return sentinel.Errorf(ErrSchema, sentinel.Table(c.t.Name), "%s: its rates table %q (inbox.Table.Rates) cannot be read (%v): create it with `inbox schema -rates -apply`, or run: %s", call, c.t.Rates, checkErr, w.Create())
	})
}

// RatesSchema returns the statement that creates, where it is not there, the rates table t
// names (Table.Rates) on d's database; one table serves every job table that names it. It
// fails, wrapping ErrSchema, where t names none or a name d would not keep.
func RatesSchema(d dialect.Dialect, t Table) (string, error) {
	if t.Rates == "" {
		return "", sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "the description names no rates table: set inbox.Table.Rates (inbox.RatesTable)")
	}
	q, err := t.Quote(d)
	if err != nil {
		return "", err
	}
	return sqltext.New(d.Caps(), sqltext.Table(q)).Rates().Create(), nil
}
