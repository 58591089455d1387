package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
)

// Message is one row to publish.
type Message struct {
	// ID is the row's id; required where the table's id is not generated, ignored where it is.
	ID int64
	// Queue is the row's group value; ignored where the table has no group column.
	Queue string
	// Payload is the row's payload; ignored where the table has no payload column.
	Payload []byte
	// Priority orders claims, smaller first; ignored where the table has no priority column.
	Priority int
	// Headers travel with the row as a JSON object; ignored where the table has no headers
	// column.
	Headers map[string]string
	// Delay hides the row from claims for this long (it sets retry_after); it needs the table's
	// RetryAfter column.
	Delay time.Duration
}

// JSONMessage returns a message for queue whose payload is v encoded with encoding/json, for
// the handler that inbox.JSON[T] adapts.
func JSONMessage[T any](queue string, v T) (Message, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("inbox: encoding a %T payload for queue %q: %w", v, queue, err)
	}
	return Message{Queue: queue, Payload: payload}, nil
}

// EnqueueJSON publishes one row for each value, its payload v encoded with encoding/json, all
// or nothing, as Enqueue does.
func EnqueueJSON[T any](ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, queue string, vs ...T) error {
	msgs := make([]Message, len(vs))
	for i, v := range vs {
		var err error
		if msgs[i], err = JSONMessage(queue, v); err != nil {
			return err
		}
	}
	return Enqueue(ctx, db, d, t, msgs...)
}

// Enqueue publishes msgs as rows of t, all or nothing: in one INSERT, or where there are more
// rows than one statement takes (maxBatchRows, 1,000) in one transaction of several, committed
// when it returns. When it fails, no row landed (but for a COMMIT cut off by a lost connection,
// whose outcome the database alone knows). On SQLite it writes under this process's writer lock
// for db, which the lease form's claims and settlements take too, so that they queue in turn
// rather than in SQLite's busy handler. It then wakes the consumers of t in this process, so
// they claim at once rather than at their next poll; on Postgres, where t.Notify is set, its
// last statement also notifies t's channel, which wakes consumers elsewhere that listen to it.
func Enqueue(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, msgs ...Message) error {
	if err := publish(ctx, db, d, t, msgs); err != nil {
		return err
	}
	wake(t.Name)
	return nil
}

// EnqueueTx publishes msgs as rows of t inside tx: they commit or roll back with the caller's
// own writes. On Postgres, where t.Notify is set, its last statement notifies t's channel,
// which Postgres delivers at tx's commit to the consumers that listen (a rollback wakes no one);
// otherwise consumers see the rows at their next claim after the commit (or their Waker's
// wake-up). When it fails after more than one
// statement's worth of rows, MySQL, MariaDB and SQLite keep the rows of the statements before
// the one that failed in tx: roll tx back rather than commit it.
func EnqueueTx(ctx context.Context, tx Tx, d dialect.Dialect, t Table, msgs ...Message) error {
	return insert(ctx, tx, d, t, msgs)
}

// publish runs Enqueue's statements: alone where one statement takes every row, in a
// transaction otherwise.
func publish(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, msgs []Message) error {
	if d.Name() == "sqlite" {
		w := sqlitewriter.For(db)
		w.Lock()
		defer w.Unlock()
	}
	if len(msgs) <= maxBatchRows {
		return insert(ctx, db, d, t, msgs)
	}
	var tx dialect.Tx
	var err error
	if d.Name() == "sqlite" {
		// IMMEDIATE takes the write lock at BEGIN, where the busy timeout waits for another
		// process's writer.
		tx, err = dialect.SQLite[isolation.Immediate]{}.Begin(ctx, db)
	} else {
		tx, err = db.BeginTx(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("inbox: publishing %d rows to table %q: beginning the transaction: %w; nothing was published", len(msgs), t.Name, err)
	}
	if err := insert(ctx, tx, d, t, msgs); err != nil {
		return errors.Join(fmt.Errorf("%w; nothing was published (the publish's transaction rolled back)", err), rollbackIfOpen(tx))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: publishing %d rows to table %q: COMMIT failed: %w; nothing was published, unless the connection failed after the database committed", len(msgs), t.Name, err)
	}
	return nil
}

func rollbackIfOpen(tx dialect.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("inbox: rolling back the publish: %w", err)
	}
	return nil
}

// maxBatchRows bounds the rows of one INSERT, keeping it under Postgres's 65,535 parameters and
// MySQL's default max_allowed_packet for small payloads.
const maxBatchRows = 1000

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insert(ctx context.Context, ex execer, d dialect.Dialect, t Table, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	// The last statement notifies the table's channel, in the statement itself, which costs no
	// round trip.
	notify := ""
	if t.Notify && d.Name() == "postgres" {
		notify = NotifyChannel(t.Name)
	}
	q, err := t.Quote(d)
	if err != nil {
		return err
	}
	var cols []string
	if !t.IDGenerated {
		cols = append(cols, q.ID)
	}
	for _, c := range []string{q.Payload, q.Group, q.Priority, q.Headers, q.RetryAfter} {
		if c != "" {
			cols = append(cols, c)
		}
	}
	// A table whose only column is its generated id gets one value per row all the same: the
	// id's default (NULL on SQLite, which assigns the rowid then).
	idOnly := ""
	if len(cols) == 0 {
		cols, idOnly = []string{q.ID}, "DEFAULT"
		if d.Name() == "sqlite" {
			idOnly = "NULL"
		}
	}
	now := time.Now()
	total, done := len(msgs), 0
	for len(msgs) > 0 {
		batch := msgs[:min(len(msgs), maxBatchRows)]
		msgs = msgs[len(batch):]
		var b strings.Builder
		b.WriteString("INSERT INTO " + q.Name + " (" + strings.Join(cols, ", ") + ") VALUES ")
		args := make([]any, 0, len(batch)*len(cols))
		n := 0
		for i, m := range batch {
			if i > 0 {
				b.WriteString(", ")
			}
			if idOnly != "" {
				b.WriteString("(" + idOnly + ")")
				continue
			}
			row, err := rowArgs(t, d, m, now)
			if err != nil {
				return err
			}
			b.WriteByte('(')
			for j := range row {
				if j > 0 {
					b.WriteString(", ")
				}
				n++
				b.WriteString(d.Placeholder(n))
			}
			b.WriteByte(')')
			args = append(args, row...)
		}
		query := b.String()
		if notify != "" && len(msgs) == 0 {
			query = sqltext.Notifying(query, d.Placeholder(len(args)+1))
			args = append(args, notify)
		}
		if _, err := ex.ExecContext(ctx, query, args...); err != nil {
			if total == len(batch) {
				return fmt.Errorf("inbox: publishing %d row(s) to table %q: %w", total, t.Name, err)
			}
			return fmt.Errorf("inbox: publishing %d rows to table %q: the statement of rows %d to %d: %w", total, t.Name, done+1, done+len(batch), err)
		}
		done += len(batch)
	}
	return nil
}

// rowArgs are one message's values in the column order insert builds.
func rowArgs(t Table, d dialect.Dialect, m Message, now time.Time) ([]any, error) {
	var row []any
	if !t.IDGenerated {
		if m.ID == 0 {
			return nil, fmt.Errorf("inbox: table %q: its id column %q is not generated, so each Message needs an ID: set Message.ID or Table.IDGenerated", t.Name, t.ID)
		}
		row = append(row, m.ID)
	}
	if t.Payload != "" {
		row = append(row, m.Payload)
	}
	if t.Group != "" {
		row = append(row, m.Queue)
	}
	if t.Priority != "" {
		row = append(row, m.Priority)
	}
	if t.Headers != "" {
		if m.Headers == nil {
			row = append(row, nil)
		} else {
			h, err := json.Marshal(m.Headers)
			if err != nil {
				return nil, err
			}
			row = append(row, string(h))
		}
	}
	switch {
	case t.RetryAfter != "" && m.Delay > 0:
		row = append(row, d.Time(now.Add(m.Delay)))
	case t.RetryAfter != "":
		row = append(row, nil)
	case m.Delay > 0:
		return nil, fmt.Errorf("inbox: table %q has no RetryAfter column, so a Message cannot be delayed: add the column or publish without Delay", t.Name)
	}
	return row, nil
}

// wakers holds, per table name, the channels of this process's consumers of that table.
var wakers struct {
	sync.Mutex
	byTable map[string]map[chan struct{}]struct{}
}

// listen registers a wake channel for table; the returned func unregisters it.
func listen(table string, ch chan struct{}) (stop func()) {
	wakers.Lock()
	defer wakers.Unlock()
	if wakers.byTable == nil {
		wakers.byTable = map[string]map[chan struct{}]struct{}{}
	}
	if wakers.byTable[table] == nil {
		wakers.byTable[table] = map[chan struct{}]struct{}{}
	}
	wakers.byTable[table][ch] = struct{}{}
	return func() {
		wakers.Lock()
		defer wakers.Unlock()
		delete(wakers.byTable[table], ch)
	}
}

// wake nudges every consumer of table without blocking.
func wake(table string) {
	wakers.Lock()
	defer wakers.Unlock()
	for ch := range wakers.byTable[table] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
