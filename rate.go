package inbox

import (
	"context"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Rate is a rate limit of a queue, of one kind of a queue or of one limit key of a queue: at
// most Starts of its rows are claimed in any window of Per, across every consumer and process
// (see docs/rates.md). Its scope and key are a Limit's: LimitPerQueue, LimitPerKind with the
// kind's name, LimitPerKey with the limit key (Table.LimitKey, Message.LimitKey).
type Rate struct {
	// Queue is the queue's name; empty for the one queue of a table without a Queue column.
	Queue string `json:"queue"`
	// Scope is what the rate counts: every row of the queue (LimitPerQueue; the zero Scope
	// too), the rows of the kind Key (LimitPerKind) or of the limit key Key (LimitPerKey).
	Scope LimitScope `json:"scope"`
	// Key is the kind's name or the limit key; empty for a queue's rate.
	Key string `json:"key,omitempty"`
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

// SetRate sets the rate r names (its queue, scope and key), or changes it: from its commit
// every claim of the lease form, in any process, admits at most r.Starts rows of the queue (of
// the kind, of the limit key) in any window of r.Per, each start counted at its claim, whether
// its handler then succeeds or not. Rows over the rate wait and are claimed as soon as the
// window lets them, and never hold back rows of other kinds, keys or queues. Changing a rate
// takes effect at the next claim; the windows that began before the change hold by the old
// rate. (A rate lowered keeps the last starts of its first slots; one raised again within an
// interval admits the slots it adds at once.) The rates of a queue, of its kinds and of its
// limit keys combine: a row is claimed only where each that matches it admits it. A row whose
// limit key is NULL (a Message without a LimitKey) is under no key's rate.
//
// It fails where r.Starts is below 1 or above MaxRateStarts, r.Per is not a positive number of
// microseconds, r.Scope is none of the three (or its Key is missing, or given to a queue's
// rate), the key is longer than MaxLimitKey (ErrLimitKeyTooLong), r names a queue other than
// empty where the table has no Queue column; and wrapping ErrSchema where it names a kind or a
// key where the table has no Kind or LimitKey column, where the description names no rates
// table, or where the database has none (naming the statement that creates it).
func (c *Client[D]) SetRate(ctx context.Context, r Rate) error {
	w, err := c.rates("SetRate", r.Queue, r.Scope, r.Key)
	if err != nil {
		return err
	}
	where := sentinel.Queue(c.t.Name, r.Queue)
	switch {
	case r.Starts < 1 || r.Starts > MaxRateStarts:
		return sentinel.Errorf(nil, where, "SetRate of %s: %d starts per interval: give between 1 and %d (ClearRate removes a rate)", rateName(r.Queue, r.Scope, r.Key), r.Starts, MaxRateStarts)
	case r.Per < time.Microsecond:
		return sentinel.Errorf(nil, where, "SetRate of %s: an interval of %v: give a positive interval of at least a microsecond", rateName(r.Queue, r.Scope, r.Key), r.Per)
	}
	v := rateValues(c.t.Name, r.Queue, r.Scope, r.Key)
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

// ClearRate removes the rate of queue, scope and key (as Rate names them: LimitPerQueue and
// no key, LimitPerKind and the kind, LimitPerKey and the limit key): from its commit claims no
// longer limit it. Clearing a rate that is not there changes nothing. It fails as SetRate does.
func (c *Client[D]) ClearRate(ctx context.Context, queue string, scope LimitScope, key string) error {
	w, err := c.rates("ClearRate", queue, scope, key)
	if err != nil {
		return err
	}
	v := rateValues(c.t.Name, queue, scope, key)
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

// Rates lists the table's rates, in order of queue, scope and key (as Limits does), each with
// the starts admitted in its last interval (Rate.Recent), read on the client's clock
// (WithClock). It fails as SetRate does.
func (c *Client[D]) Rates(ctx context.Context) ([]Rate, error) {
	w, err := c.rates("Rates", "", LimitPerQueue, "")
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
		if err := rows.Scan(&r.Queue, &scope, &r.Key, &r.Starts, &per, &r.Recent); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its rates: %w", err)
		}
		r.Scope, r.Per = LimitScope(scope), time.Duration(per)*time.Microsecond
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its rates: %w", err)
	}
	return out, nil
}

// rateName names the rate of queue, scope and key in an error.
func rateName(queue string, scope LimitScope, key string) string {
	switch scope {
	case LimitPerKind:
		return "the rate of kind " + strconv.Quote(key) + " of queue " + strconv.Quote(queue)
	case LimitPerKey:
		return "the rate of limit key " + strconv.Quote(key) + " of queue " + strconv.Quote(queue)
	}
	return "the rate of queue " + strconv.Quote(queue)
}

// rateValues are the values that key the rate of queue, scope and key of the job table named
// table; the zero scope is the queue's.
func rateValues(table, queue string, scope LimitScope, key string) sqltext.Values {
	if scope == "" {
		scope = LimitPerQueue
	}
	return sqltext.Values{Table: table, Queue: queue, Scope: string(scope), RateKey: key}
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
// the rate of queue, scope and key; it fails, wrapping ErrSchema, where the description names
// no rates table, and where queue, scope and key name what the table has no column for
// (checkRate).
func (c *Client[D]) rates(call, queue string, scope LimitScope, key string) (sqltext.Rates, error) {
	if c.t.Rates == "" {
		return sqltext.Rates{}, sentinel.Errorf(ErrSchema, sentinel.Table(c.t.Name), "%s needs a rates table, which the description does not name: set inbox.Table.Rates to inbox.RatesTable (%q) and create it with `inbox schema -rates -apply`", call, RatesTable)
	}
	if err := c.checkRate(call, queue, scope, key); err != nil {
		return sqltext.Rates{}, err
	}
	q, err := c.t.Quote(c.d)
	if err != nil {
		return sqltext.Rates{}, err
	}
	return sqltext.New(c.d.Caps(), sqltext.Table(q)).Rates(), nil
}

// checkRate refuses a rate's queue, scope and key that no claim could match, or that the rates
// table's key does not hold; the zero scope is the queue's. Its words are checkLimit's.
func (c *Client[D]) checkRate(call, queue string, scope LimitScope, key string) error {
	where := sentinel.Queue(c.t.Name, queue)
	if scope == "" {
		scope = LimitPerQueue
	}
	switch {
	case c.t.Queue == "" && queue != "":
		return sentinel.Errorf(nil, sentinel.Table(c.t.Name), "%s of queue %q: the description has no Queue column, so the table is one queue: name it by the empty name", call, queue)
	case scope != LimitPerQueue && scope != LimitPerKind && scope != LimitPerKey:
		return sentinel.Errorf(nil, where, "%s: scope %q is none of inbox.LimitPerQueue, LimitPerKind, LimitPerKey", call, scope)
	case scope == LimitPerQueue && key != "":
		return sentinel.Errorf(nil, where, "%s: a queue's rate takes no key (%q): leave Key empty, or choose LimitPerKind or LimitPerKey", call, key)
	case scope != LimitPerQueue && key == "":
		return sentinel.Errorf(nil, where, "%s: a rate per %s needs the %s in Key", call, scope, map[LimitScope]string{LimitPerKind: "kind's name", LimitPerKey: "limit key"}[scope])
	}
	return c.checkRateKey(call, queue, scope, key)
}

// checkRateKey refuses a rate's kind or limit key where the table has no column for it, and a
// queue, kind or key longer than the rates table's key holds.
func (c *Client[D]) checkRateKey(call, queue string, scope LimitScope, key string) error {
	where := sentinel.Queue(c.t.Name, queue)
	switch {
	case scope == LimitPerKind && c.t.Kind == "":
		return sentinel.Errorf(ErrSchema, where, "%s of kind %q: the description has no Kind column: name it in inbox.Table.Kind, or set the queue's rate", call, key)
	case scope == LimitPerKey && c.t.LimitKey == "":
		return sentinel.Errorf(ErrSchema, where, "%s of limit key %q: a rate per key needs a limit key column, which the description does not name: add it (inbox schema -limit-key) and set inbox.Table.LimitKey", call, key)
	case scope == LimitPerKey && utf8.RuneCountInString(key) > MaxLimitKey:
		return sentinel.Errorf(ErrLimitKeyTooLong, where, "%s: the key is %d characters, over the %d the rates table holds (MaxLimitKey): hash a longer key into one", call, utf8.RuneCountInString(key), MaxLimitKey)
	case len(queue) > MaxGroupKey || (scope == LimitPerKind && len(key) > MaxGroupKey):
		return sentinel.Errorf(nil, where, "%s: a queue or kind name longer than %d bytes, which the rates table's key does not hold", call, MaxGroupKey)
	}
	return nil
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
