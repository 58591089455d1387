package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// OnConflict says what a publish does with a message whose UniqueKey another row holds.
type OnConflict int

const (
	// OnConflictSkip publishes nothing for the message: the result says it was a duplicate,
	// with the id of the row that holds the key. The default.
	OnConflictSkip OnConflict = iota
	// OnConflictReplace writes the message's payload and run time (Delay or RunAt; none: due at
	// once) into the row that holds the key, where that row is queued (neither processed nor
	// dead) and no consumer holds it; a row in work or settled is left as it is. A row in work
	// is told by the row lock form's lock (SKIP LOCKED) and the lease form's lease (where
	// Table.LockedUntil names its column); the advisory form's lock is on a name the table does
	// not show, so a row it holds looks queued and is replaced, and its handler's Ack then
	// settles it with the replacement unrun: take skip or throttle with the advisory form.
	OnConflictReplace
	// OnConflictThrottle keeps the earlier of the two run times: the row that holds the key
	// takes the message's run time where that is earlier than its own, and is queued and held by
	// no consumer. It needs the table's RetryAfter column.
	OnConflictThrottle
)

// Enqueued is what became of one message of a publish.
type Enqueued struct {
	// ID is the id of the message's row: the row published, or for a duplicate the row that
	// holds its key.
	ID int64
	// Duplicate says another row held the message's unique key, so no row was published for it.
	Duplicate bool
	// Changed says a duplicate's OnConflict (replace, throttle) changed the row that holds the
	// key; false where the row was in work, settled, or needed no change.
	Changed bool
}

// EnqueueResults publishes msgs as rows of t, all or nothing in one transaction, and says what
// became of each, in the order of msgs. A message with a UniqueKey that another row holds
// publishes no row: its result is Duplicate, with the holder's id, and its OnConflict is
// applied to the holder. A key twice in msgs is a duplicate the second time, of the first.
//
// The table's unique index decides, inside the transaction: two publishes of one key at once
// insert one row between them, whichever commits first, and a publish whose transaction rolls
// back leaves the key free. A publish never waits for a job in work: the holder's id is read
// without locking its row (on MySQL and MariaDB with a shared lock on the unique index's
// record alone), and a replace or throttle changes a holder only where no transaction locks it
// (SKIP LOCKED) and no lease runs ahead. It can wait for another publish of the same key whose
// transaction has not ended, and for a settlement between its statement and its commit, as any
// unique index makes an INSERT wait.
//
// Each message is a one-row INSERT of its own (EnqueueIDs says why): publish bulk rows without
// keys with Enqueue. A transient conflict (a deadlock between publishes of the same keys in
// different orders) runs the whole transaction again, within the dialect's budget.
func EnqueueResults(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, msgs ...Message) ([]Enqueued, error) {
	return publishResults(ctx, db, d, t, nil, msgs)
}

// EnqueueTxResults publishes msgs inside tx, the caller's own transaction, as EnqueueResults
// does: the rows and the changes to holders commit or roll back with the caller's writes, and a
// rollback leaves every key as it found it. On Postgres in a REPEATABLE READ or SERIALIZABLE
// transaction, a key taken by a row committed after the transaction's snapshot fails the
// publish with a serialization failure: run the transaction again. On MySQL and MariaDB the
// holder's index record stays share-locked until tx ends, so a settlement of that holder (which
// clears its key) waits for tx: keep tx short. When it fails, roll tx back: on MySQL, MariaDB
// and SQLite the rows of the messages before the one that failed stay in tx.
func EnqueueTxResults(ctx context.Context, tx Tx, d dialect.Dialect, t Table, msgs ...Message) ([]Enqueued, error) {
	return enqueueTxResults(ctx, tx, d, t, nil, msgs)
}

// keyed reports whether a message of msgs has a unique key.
func keyed(msgs []Message) bool {
	for _, m := range msgs {
		if m.UniqueKey != "" {
			return true
		}
	}
	return false
}

// uniqueKey is m's key as publishing binds it (nil for none), refused where t has no unique key
// column or the key is longer than it holds.
func uniqueKey(t Table, m Message) (any, error) {
	return keyArg(t, keyColumn{"UniqueKey", "unique key", "-unique-key", t.UniqueKey, MaxUniqueKey, ErrUniqueKeyTooLong}, m.UniqueKey)
}

// keyColumn is a column of keys a message may set (a unique key, a FIFO group): the Message's
// and the Table's field, what the column holds, the inbox schema flag that adds it, its name
// in the description, the longest key and the error of a longer one.
type keyColumn struct {
	field, what, flag, column string
	max                       int
	tooLong                   error
}

// keyArg is key as publishing binds it into column k: nil for none; refused where the
// description names no such column (ErrSchema) or the key is longer than it holds, before any
// statement runs.
func keyArg(t Table, k keyColumn, key string) (any, error) {
	switch n := utf8.RuneCountInString(key); {
	case key == "":
		return nil, nil
	case k.column == "":
		return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "a Message has %s %q, but the description names no %s column: add the column (inbox schema %s) and name it in inbox.Table.%s", k.field, key, k.what, k.flag, k.field)
	case n > k.max:
		return nil, sentinel.Errorf(k.tooLong, sentinel.Column(t.Name, k.column), "a Message's %s is %d characters, over the %d the column holds (Max%s): hash a longer key into one (hex SHA-256 is 64)", k.field, n, k.max, k.field)
	}
	return key, nil
}

// publishResults is EnqueueResults, its times from clock (nil: this host's), in a transaction
// of its own run again on a transient conflict, under this process's writer lock on SQLite.
func publishResults(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, clock Clock, msgs []Message) ([]Enqueued, error) {
	if d.Caps().OneWriter {
		w := sqlitewriter.For(db)
		w.Lock()
		defer w.Unlock()
	}
	var res []Enqueued
	err := conflict.Retry(ctx, d, func() error {
		tx, err := dialect.BeginWrite(ctx, d, db)
		if err != nil {
			return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d row(s): beginning the transaction: %w; nothing was published", len(msgs), err)
		}
		if res, err = enqueueTxResults(ctx, tx, d, t, clock, msgs); err != nil {
			return errors.Join(fmt.Errorf("%w; nothing was published (the publish's transaction rolled back)", err), rollbackIfOpen(tx))
		}
		if err := tx.Commit(); err != nil {
			return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d row(s): COMMIT failed: %w; nothing was published, unless the connection failed after the COMMIT", len(msgs), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	wake(t.Name)
	return res, nil
}

// enqueueTxResults is EnqueueTxResults, its times from clock (nil: this host's).
func enqueueTxResults(ctx context.Context, tx Tx, d dialect.Dialect, t Table, clock Clock, msgs []Message) ([]Enqueued, error) {
	now := clockNow(clock)
	sts, err := statements(d, t, msgs, true, now)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.OnConflict == OnConflictThrottle && m.UniqueKey != "" && t.RetryAfter == "" {
			return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "OnConflictThrottle keeps the earlier run time, in the RetryAfter column, which the description lacks: name it in inbox.Table.RetryAfter, or use OnConflictSkip")
		}
	}
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	r := resolver{d: d, t: t, u: sqltext.New(d.Caps(), sqltext.Table(q)).Unique(q.LockedUntil), now: now}
	res := make([]Enqueued, len(msgs))
	ids := make([]int64, len(msgs))
	for _, st := range sts {
		if !st.unique {
			one := st
			one.first = 0 // insert places its ids from the first of the messages it is given
			if err := insert(ctx, tx, d, t, msgs[st.first:st.first+st.rows], []statement{one}, ids[st.first:st.first+st.rows]); err != nil {
				return nil, err
			}
			continue
		}
		m := msgs[st.first]
		if res[st.first], err = r.publish(ctx, tx, st, m); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing the message of unique key %q: %w", m.UniqueKey, err)
		}
		ids[st.first] = res[st.first].ID
	}
	for i := range res {
		res[i].ID = ids[i]
	}
	return res, nil
}

// resolver publishes the messages with a unique key of one publish.
type resolver struct {
	d   dialect.Dialect
	t   Table // as described (its names unquoted)
	u   sqltext.Unique
	now time.Time
}

// holderTries bounds the rounds of a publish whose key's holder went away (it settled, or its
// key expired) between the INSERT that found it and the read of its id: each round is a new
// INSERT, which takes the key where it is free.
const holderTries = 5

// publish runs st, the INSERT of m, and where another row holds m's key reads that row's id and
// applies m.OnConflict to it.
func (r resolver) publish(ctx context.Context, tx Tx, st statement, m Message) (Enqueued, error) {
	for range holderTries {
		id, inserted, err := r.insert(ctx, tx, st, m)
		if err != nil || inserted {
			return Enqueued{ID: id}, err
		}
		v := &sqltext.Values{UniqueKey: m.UniqueKey, Now: r.d.Time(r.now)}
		holder := r.u.Holder()
		err = tx.QueryRowContext(ctx, holder.SQL, holder.Bind(nil, v)...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Enqueued{}, fmt.Errorf("reading the row that holds the key: %w", err)
		}
		v.IDs = []int64{id}
		if r.t.UniqueWindow > 0 {
			v.SettledBefore = r.d.Time(r.now.Add(-r.t.UniqueWindow))
			expired, err := r.change(ctx, tx, r.u.PickExpired(), r.u.Expire(), v)
			if err != nil {
				return Enqueued{}, fmt.Errorf("clearing the key of row %d, settled before its window: %w", id, err)
			}
			if expired {
				continue
			}
		}
		changed, err := r.onConflict(ctx, tx, m, v)
		if err != nil {
			return Enqueued{}, fmt.Errorf("changing row %d, which holds the key (OnConflict): %w", id, err)
		}
		return Enqueued{ID: id, Duplicate: true, Changed: changed}, nil
	}
	return Enqueued{}, fmt.Errorf("the row that holds the key went away %d times between the INSERT and the read of its id: publish again", holderTries)
}

// insert runs st, the INSERT of m, and reports whether it inserted, with the new row's id: no
// row returned (ON CONFLICT DO NOTHING), or a duplicate-key error on the unique key's index
// (MySQL, MariaDB), is the key taken; any other error is returned as it is.
func (r resolver) insert(ctx context.Context, tx Tx, st statement, m Message) (int64, bool, error) {
	id := m.ID
	if r.d.Caps().UpsertNothing {
		err := tx.QueryRowContext(ctx, st.query, st.args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return id, err == nil, err
	}
	res, err := tx.ExecContext(ctx, st.query, st.args...)
	if dialect.DuplicateOn(err, r.t.UniqueIndex()) {
		return 0, false, nil
	}
	if err == nil && r.t.IDGenerated {
		id, err = res.LastInsertId()
	}
	return id, err == nil, err
}

// onConflict applies m.OnConflict to the holder v names, and reports whether it changed it.
func (r resolver) onConflict(ctx context.Context, tx Tx, m Message, v *sqltext.Values) (bool, error) {
	if m.OnConflict == OnConflictSkip {
		return false, nil
	}
	at, err := runAfter(r.t, m, r.now)
	if err != nil {
		return false, err
	}
	v.RunAt = r.d.Time(r.now)
	if !at.IsZero() {
		v.At, v.RunAt = r.d.Time(at), r.d.Time(at)
	}
	change := r.u.Replace()
	if m.OnConflict == OnConflictThrottle {
		change = r.u.Throttle()
	}
	v.Payload = m.Payload
	return r.change(ctx, tx, r.u.PickQueued(), change, v)
}

// change runs change over the row v names, after pick locks it where the database has row
// locks (a row another transaction locks is passed over, never waited for), and reports whether
// it changed it.
func (r resolver) change(ctx context.Context, tx Tx, pick, change sqltext.Statement, v *sqltext.Values) (bool, error) {
	if change.Empty() {
		return false, nil
	}
	if r.d.Caps().SkipLocked {
		var id int64
		err := tx.QueryRowContext(ctx, pick.SQL, pick.Bind(nil, v)...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	res, err := tx.ExecContext(ctx, change.SQL, change.Bind(nil, v)...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
