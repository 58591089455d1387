package inbox

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// A Waker wakes a consumer's idle workers when rows may have landed that no publish in this
// process announced: rows another process published, or a connection of its own whose commit
// this process did not see. Without one, such rows wait for the next poll (Config.PollInterval).
// The module github.com/sqlinbox/inbox/pgnotify listens for Postgres notifications;
// DataVersionWaker watches a SQLite database. A Waker may serve several consumers at once.
type Waker interface {
	// Watch calls wake each time rows may have landed in the table named table (as described),
	// until ctx is done, and returns then. It retries its own failures, logging them to log, and
	// calls wake after each recovery, since it may have missed a change meanwhile. log is the
	// consumer's, and names its queue and table already: a record that named them again would
	// carry the key twice.
	Watch(ctx context.Context, table string, log *slog.Logger, wake func())
}

// NotifyChannel is the Postgres notification channel of the table named table (as described):
// "inbox." and the name, or where that is longer than Postgres's 63 bytes, its first 54 bytes, a
// dot and 8 hex digits of a hash of the whole. Enqueue and EnqueueTx notify it on Postgres
// where Table.Notify is set.
func NotifyChannel(table string) string { return sqltext.Channel(table) }

// DataVersionWaker is a Waker for SQLite: every Every it reads PRAGMA data_version, a number
// that changes when another connection (of this process or another) commits to the database,
// and wakes the consumer when it changed. The read costs a few microseconds and takes no lock,
// where a claim takes the write lock. It runs on a connection of DB's pool that it keeps while
// it watches: count it in db.SetMaxOpenConns beside the consumer's (the consumer does not).
// Commits of the consumer's own claims and settlements wake it too; a claim that then finds
// nothing writes nothing, which changes no version.
type DataVersionWaker struct {
	// DB is the SQLite database, the consumer's. Required.
	DB *sql.DB
	// Every is how often it reads the version. Default 5 ms.
	Every time.Duration
}

// Watch implements Waker.
func (w *DataVersionWaker) Watch(ctx context.Context, _ string, log *slog.Logger, wake func()) {
	every := w.Every
	if every <= 0 {
		every = 5 * time.Millisecond
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var last int64
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		var err error
		if conn == nil {
			conn, err = w.DB.Conn(ctx)
		}
		var v int64
		if err == nil {
			err = conn.QueryRowContext(ctx, sqltext.DataVersion).Scan(&v)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				log.Error("inbox: reading SQLite's data version failed; trying again, and meanwhile the consumer polls", "err", err)
			}
			failing = true
			if conn != nil {
				conn.Close()
				conn = nil
			}
		case failing || v != last:
			// A version read on a new connection is not comparable with the last one: wake
			// once, as after any recovery.
			if failing {
				log.Info("inbox: reading SQLite's data version again")
			}
			failing, last = false, v
			wake()
		}
	}
}

// dueWatch is the query for when the queue's next delayed row falls due: after a claim that
// found nothing, an idle worker waits until then where that comes before its next poll.
//
// On MySQL and MariaDB (Caps.DefaultReadCommitted) it runs in a READ COMMITTED transaction, the
// level their dialects open at by default, rather than alone at the session's level (the
// server's REPEATABLE READ, unless the DSN says otherwise). It reads at READ COMMITTED whatever
// level the dialect declares: one MIN reads the same at any level, and InnoDB would take a
// serializable transaction's read for a locking one, which waits behind the rows that claims hold.
type dueWatch struct {
	db            *sql.DB
	d             dialect.Dialect
	readCommitted dialect.Dialect // the dialect's database at READ COMMITTED; nil: the query runs alone
	query         sqltext.Statement
	vals          sqltext.Values // the queue's name, the pause's key; each run sets now
	clock         Clock
}

// newDueWatch returns the query for plan's table, or nil where the form did not describe its
// table or the table has no RetryAfter column.
func newDueWatch(db *sql.DB, plan Plan, b Binding) (*dueWatch, error) {
	if plan.Dialect == nil || plan.Described.RetryAfter == "" {
		return nil, nil
	}
	q, err := plan.Described.Quote(plan.Dialect)
	if err != nil {
		return nil, err
	}
	kinds := make([]sqltext.Kind, len(b.Kinds))
	for i, k := range b.Kinds {
		kinds[i] = sqltext.Kind{Name: k.Kind, MaxAttempts: k.MaxAttempts}
	}
	w := &dueWatch{db: db, d: plan.Dialect, query: sqltext.New(plan.Dialect.Caps(), sqltext.Table(q)).OfKinds(kinds).NextDue(), clock: b.Clock}
	if plan.Dialect.Caps().DefaultReadCommitted {
		if w.readCommitted, err = dialect.Parse(plan.Dialect.Name(), "read committed"); err != nil {
			return nil, err
		}
	}
	w.vals.Queue = b.Name
	if plan.Described.Pauses != "" {
		w.vals.Table = plan.Described.Name
	}
	if w.clock == nil {
		w.clock = hostClock{}
	}
	return w, nil
}

// until returns how long from now the queue's next delayed row falls due, and false where no
// row is delayed or the query failed (the worker then waits its poll).
func (w *dueWatch) until(ctx context.Context) (time.Duration, bool) {
	now := w.clock.Now()
	v := w.vals
	v.Now = w.d.Time(now)
	due, err := w.read(ctx, w.query.Bind(make([]any, 0, len(w.query.Args)), &v))
	if err != nil || due == nil {
		return 0, false
	}
	t, err := dialect.ScannedTime(due)
	if err != nil {
		return 0, false
	}
	return t.Sub(now), true
}

// read runs the query with args, in a READ COMMITTED transaction where w.readCommitted is set,
// and returns the time it read (nil for none), as the driver scanned it. A transaction whose end
// fails discards its connection (dialect.Tx).
func (w *dueWatch) read(ctx context.Context, args []any) (due any, err error) {
	if w.readCommitted == nil {
		err = w.db.QueryRowContext(ctx, w.query.SQL, args...).Scan(&due)
		return due, err
	}
	tx, err := w.readCommitted.Begin(ctx, w.db)
	if err != nil {
		return nil, err
	}
	if err := tx.QueryRowContext(ctx, w.query.SQL, args...).Scan(&due); err != nil {
		tx.Rollback()
		return nil, err
	}
	return due, tx.Commit()
}
