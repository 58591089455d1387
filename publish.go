package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Message is one row to publish.
type Message struct {
	// ID is the row's id; required where the table's id is not generated, ignored where it is.
	ID int64
	// Queue is the row's queue, written to the queue column (Table.Queue); ignored where the
	// table has none.
	Queue string
	// Kind is the row's kind of job, written to the kind column (Table.Kind): the kind a
	// consumer registers a handler for (Kinds). Job sets it from its arguments' type. Ignored
	// where the table has no kind column.
	Kind string
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
	// RunAt hides the row from claims until this time (it sets retry_after); the zero time is
	// not set. It needs the table's RetryAfter column, and is refused beside a Delay. A time at
	// or before the publish's now is due at once, written as a row without one (so it is claimed
	// in a new row's order); a time is kept to the microsecond, and one past the last
	// microsecond of year 9999 (UTC), which not every database stores, is refused.
	RunAt time.Time
	// Columns sets the application's own columns of the row, those with no role, by name: any
	// column of the table, named in Table.Columns or not (an advisory key's column, say), each
	// value one the driver takes as an argument. A column a role names is refused (ErrSchema),
	// under any case where the database's column names ignore it (MySQL, MariaDB, SQLite), and
	// so is the lease column of a lease form built over the table in this process. The messages
	// of one Enqueue are written in order, whatever columns each sets, in one INSERT (up to 1,000
	// rows) that writes DEFAULT for a column a message leaves out, which then takes its default;
	// on SQLite, whose VALUES take no DEFAULT, one INSERT for each run of consecutive messages
	// that set the same columns.
	Columns map[string]any
	// UniqueKey is the row's unique key, written to the unique key column (Table.UniqueKey):
	// where another row holds the key, no row is published for the message, which OnConflict
	// resolves; the result-returning calls (EnqueueResults) say which row holds it. At most
	// MaxUniqueKey characters. Empty: no key. A UniqueKey where the table has no unique key
	// column is refused (ErrSchema). A message with a key is published by a one-row INSERT of
	// its own, in a transaction with the publish's other messages. The key is held while the row
	// is queued or in work, by default (Table.UniqueKey says the scopes): a row in work under the
	// row lock or advisory form looks queued to a publisher, and holds its key all the same.
	UniqueKey string
	// OnConflict says what to do where another row holds UniqueKey: skip the message (the
	// default), replace the holder's payload and run time, or keep the earlier of the two run
	// times (throttle), the last two only on a holder that is queued and held by no consumer.
	// Ignored without a UniqueKey.
	OnConflict OnConflict
	// GroupKey is the row's FIFO group, written to the group column (Table.GroupKey): the rows of one
	// queue and group run one at a time, in id order among committed rows (docs/groups.md). At
	// most MaxGroupKey characters. Empty: the row belongs to no group (NULL). A GroupKey where the
	// table has no group column is refused (ErrSchema). Publishing writes the row alone: it never
	// reads or waits for the group's hold, which only claims take.
	GroupKey string
	// LimitKey is the row's concurrency limit key, written to the limit key column
	// (Table.LimitKey): a limit set on the key bounds its rows in work at once (docs/limits.md).
	// At most MaxLimitKey characters. Empty: NULL, the row is under no key's limit. A LimitKey
	// where the table has no limit key column is refused (ErrSchema).
	LimitKey string

	err error // Job's: the arguments did not encode, and the message cannot be published
}

// JSONMessage returns a message for queue whose payload is v encoded with encoding/json, for
// the handler that inbox.JSON[T] adapts.
func JSONMessage[T any](queue string, v T) (Message, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return Message{}, sentinel.Errorf(nil, "", "encoding a %T payload for queue %q: %w", v, queue, err)
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

// Enqueue publishes msgs as rows of t, all or nothing: in one INSERT, or where one statement
// does not take them all (more than maxBatchRows, 1,000, or on SQLite messages that set
// different Columns) in one transaction of several, committed when it returns. When it fails, no row
// landed (but for a COMMIT cut off by a lost connection, whose outcome the database alone
// knows). On SQLite it writes under this process's writer lock for db, which the lease form's
// claims and settlements take too, so that they queue in turn rather than in SQLite's busy
// handler. It then wakes the consumers of t in this process, so they claim at once rather than
// at their next poll; on Postgres, where t.Notify is set, its last statement also notifies t's
// channel, which wakes consumers elsewhere that listen to it. Messages with a UniqueKey are
// resolved as EnqueueResults says, and whether each was a duplicate is not reported.
func Enqueue(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, msgs ...Message) error {
	return publish(ctx, db, d, t, nil, msgs, nil)
}

// EnqueueIDs publishes msgs as Enqueue does, all or nothing, and returns the ids of their rows,
// in the order of msgs. Where the table's id is generated, each message is a one-row INSERT of
// its own (all in one transaction where there are several), which hands back its id: RETURNING
// on Postgres and SQLite, LastInsertId on MySQL and MariaDB. No multi-row INSERT tells which id
// went to which row on every database: Postgres leaves the order of RETURNING rows unspecified,
// SQLite documents it as arbitrary, and under MySQL's interleaved auto-increment lock mode (8.0's
// default, innodb_autoinc_lock_mode = 2) the ids of one statement need not be consecutive, so
// LAST_INSERT_ID, the first of them, does not give the others. It costs a round trip per
// message: publish bulk rows whose ids are not needed with Enqueue. A message with a UniqueKey
// that another row holds gets that row's id (EnqueueResults says which were duplicates).
func EnqueueIDs(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, msgs ...Message) ([]int64, error) {
	return publishIDs(ctx, db, d, t, nil, msgs)
}

// publishIDs publishes msgs as publish does and returns their rows' ids.
func publishIDs(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, clock Clock, msgs []Message) ([]int64, error) {
	ids := make([]int64, len(msgs))
	if err := publish(ctx, db, d, t, clock, msgs, ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// EnqueueTx publishes msgs as rows of t inside tx: they commit or roll back with the caller's
// own writes. On Postgres, where t.Notify is set, its last statement notifies t's channel,
// which Postgres delivers at tx's commit to the consumers that listen (a rollback wakes no one);
// otherwise consumers see the rows at their next claim after the commit (or their Waker's
// wake-up). When it fails at its second statement or
// later (more than maxBatchRows messages, or on SQLite messages that set different Columns), MySQL,
// MariaDB and SQLite keep the rows of the statements before the one that failed in tx: roll tx
// back rather than commit it. Messages with a UniqueKey are resolved as EnqueueTxResults says.
func EnqueueTx(ctx context.Context, tx Tx, d dialect.Dialect, t Table, msgs ...Message) error {
	return enqueueTx(ctx, tx, d, t, nil, msgs)
}

// enqueueTx is EnqueueTx, its Delays counted from clock's now (nil: this host's).
func enqueueTx(ctx context.Context, tx Tx, d dialect.Dialect, t Table, clock Clock, msgs []Message) error {
	if keyed(msgs) {
		_, err := enqueueTxResults(ctx, tx, d, t, clock, msgs)
		return err
	}
	sts, err := statements(d, t, msgs, false, clockNow(clock))
	if err != nil {
		return err
	}
	return insert(ctx, tx, d, t, msgs, sts, nil)
}

// publish runs Enqueue's statements (publishRows), then wakes the consumers of t in this
// process.
func publish(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, clock Clock, msgs []Message, ids []int64) error {
	if keyed(msgs) {
		res, err := publishResults(ctx, db, d, t, clock, msgs)
		if err != nil {
			return err
		}
		for i := range ids {
			ids[i] = res[i].ID
		}
		return nil
	}
	if err := publishRows(ctx, db, d, t, clock, msgs, ids); err != nil {
		return err
	}
	wake(t.Name)
	return nil
}

// publishRows runs Enqueue's statements: alone where one statement takes every row, in a
// transaction otherwise. Where ids is not nil it receives the rows' ids, as insert says. Its
// Delays count from clock's now (nil: this host's).
func publishRows(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, clock Clock, msgs []Message, ids []int64) error {
	sts, err := statements(d, t, msgs, ids != nil, clockNow(clock))
	if err != nil {
		return err
	}
	if d.Caps().OneWriter {
		w := sqlitewriter.For(db)
		w.Lock()
		defer w.Unlock()
	}
	if len(sts) <= 1 {
		return insert(ctx, db, d, t, msgs, sts, ids)
	}
	tx, err := dialect.BeginWrite(ctx, d, db)
	if err != nil {
		return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d rows: beginning the transaction: %w; nothing was published", len(msgs), err)
	}
	if err := insert(ctx, tx, d, t, msgs, sts, ids); err != nil {
		return errors.Join(fmt.Errorf("%w; nothing was published (the publish's transaction rolled back)", err), rollbackIfOpen(tx))
	}
	if err := tx.Commit(); err != nil {
		return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d rows: COMMIT failed: %w; nothing was published, unless the connection failed after the COMMIT", len(msgs), err)
	}
	return nil
}

func rollbackIfOpen(tx dialect.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return sentinel.Errorf(nil, "", "rolling back the publish: %w", err)
	}
	return nil
}

// maxBatchRows bounds the rows of one INSERT, keeping it under Postgres's 65,535 parameters and
// MySQL's default max_allowed_packet for small payloads.
const maxBatchRows = 1000

// rowsPerInsert is how many rows of values bound each one INSERT of a publish writes on the
// database c describes: maxBatchRows, fewer where it bounds the values (Caps.InsertValues).
func rowsPerInsert(c *dialect.Caps, values int) int {
	if c.InsertValues == 0 || values == 0 {
		return maxBatchRows
	}
	return min(max(c.InsertValues/values, 1), maxBatchRows)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// statement is one INSERT of a publish: its text, its arguments, and the messages it writes,
// msgs[first:first+rows].
type statement struct {
	query       string
	args        []any
	first, rows int
	notify      bool // it only notifies the table's channel (after one-row INSERTs)
	unique      bool // it publishes one message with a unique key (sqltext.Unique.Insert)
}

// statements are the INSERTs that publish msgs to t, in the messages' order: as many rows in
// each as rowsPerInsert allows, whatever own columns (Message.Columns) each message sets where
// VALUES take DEFAULT (dialect.Caps.ValuesDefault), which a row writes for the own columns of
// the statement it leaves out; elsewhere a statement apart for each run of consecutive messages
// that set the same own columns. With ids set, a statement per message that hands back its
// generated id; and wherever a message has a unique key, a statement per message, a keyed
// message's the INSERT that finds its key taken (sqltext.Unique.Insert). It builds them all before any runs, so that a message it refuses sends nothing.
// A Delay counts from now, and a RunAt not after it is due at once (runAfter).
func statements(d dialect.Dialect, t Table, msgs []Message, ids bool, now time.Time) ([]statement, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for _, m := range msgs {
		if m.err != nil {
			return nil, m.err
		}
	}
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	s := sqltext.New(d.Caps(), sqltext.Table(q))
	perRow := ids && t.IDGenerated || keyed(msgs)
	sets := make([][]string, len(msgs)) // the own columns each message sets, as named, sorted
	var out []statement
	for i, m := range msgs {
		if sets[i], err = ownColumns(t, d, m); err != nil {
			return nil, err
		}
		if i == 0 || perRow || out[len(out)-1].rows >= rowsPerInsert(d.Caps(), s.InsertValues(len(sets[i]))) || !d.Caps().ValuesDefault && !slices.Equal(sets[i], sets[i-1]) {
			out = append(out, statement{first: i})
		}
		out[len(out)-1].rows++
	}
	for i := range out {
		st := &out[i]
		if err := st.build(s, d, t, msgs[st.first:st.first+st.rows], sets[st.first:st.first+st.rows], now, perRow); err != nil {
			return nil, err
		}
	}
	if t.Notify && d.Caps().Notifies {
		// The last statement notifies the table's channel, in the statement itself where it
		// returns nothing (no round trip more), and after it where it returns an id.
		channel := NotifyChannel(t.Name)
		if perRow {
			out = append(out, statement{query: sqltext.Notify, args: []any{channel}, notify: true})
		} else {
			last := &out[len(out)-1]
			last.query = sqltext.Notifying(last.query, d.Placeholder(len(last.args)+1))
			last.args = append(last.args, channel)
		}
	}
	return out, nil
}

// build writes the statement of msgs, its rows, each setting the own columns sets gives for it:
// the statement names every own column of its rows, and a row binds those it sets and writes
// DEFAULT for the others (InsertSparse), or with perRow hands back its id.
func (st *statement) build(s sqltext.SQL, d dialect.Dialect, t Table, msgs []Message, sets [][]string, now time.Time, perRow bool) error {
	union := slices.Concat(sets...)
	slices.Sort(union)
	union = slices.Compact(union)
	own := make([]string, len(union))
	for j, n := range union {
		var err error
		if own[j], err = d.Quote(n); err != nil {
			return sentinel.Errorf(ErrSchema, "", "table %q, Message.Columns: %v", t.Name, err)
		}
	}
	var sparse [][]bool // which own columns each row binds; nil where every row binds them all
	for i, m := range msgs {
		row, err := rowArgs(t, d, m, now)
		if err != nil {
			return err
		}
		var binds []bool // nil: the row sets every own column of the statement
		if len(sets[i]) < len(union) {
			binds = make([]bool, len(union))
			if sparse == nil {
				sparse = make([][]bool, len(msgs))
			}
			sparse[i] = binds
		}
		for j, n := range union {
			if v, ok := m.Columns[n]; ok {
				row = append(row, v)
				if binds != nil {
					binds[j] = true
				}
			}
		}
		st.args = append(st.args, row...)
	}
	switch {
	case perRow && msgs[0].UniqueKey != "":
		st.query = s.Unique("").Insert(own)
		st.unique = true
	case perRow:
		st.query = s.InsertID(own)
	case sparse != nil:
		st.query = s.InsertSparse(own, sparse)
	default:
		st.query = s.Insert(st.rows, own)
	}
	return nil
}

// ownColumns are the names of the own columns m sets (Message.Columns), sorted; it refuses a
// name that is empty, or that names a column the library writes by itself: one of t's roles, or
// a form's column of t recorded in this process (the lease form's), under any case on d where d's
// column names ignore case (Caps.CaseSensitiveNames false: MySQL, MariaDB, SQLite).
func ownColumns(t Table, d dialect.Dialect, m Message) ([]string, error) {
	if len(m.Columns) == 0 {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(m.Columns))
	same := func(a, b string) bool { return a == b }
	if !d.Caps().CaseSensitiveNames {
		same = strings.EqualFold // Unicode folding, as MySQL's; SQLite folds ASCII letters only
	}
	for _, n := range names {
		if err := t.ownColumn("Message.Columns", n); err != nil {
			return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "%v", err)
		}
		what, column := written(t, n, same)
		switch {
		case column == n:
			return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "Message.Columns names column %q, %s, which the library writes by itself: leave it out of Message.Columns", n, what)
		case column != "":
			return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "Message.Columns names column %q, which %s takes for %q, %s (its column names ignore case): leave it out of Message.Columns", n, d.Caps().Title, column, what)
		}
	}
	return names, nil
}

// written returns the column the library writes by itself that name names, compared by same,
// and what it is ("the table's Attempt column"); empty for none.
func written(t Table, name string, same func(a, b string) bool) (what, column string) {
	for _, r := range t.roles() {
		if *r.name != "" && same(*r.name, name) {
			return "the table's " + r.role + " column", *r.name
		}
	}
	return "", ""
}

// insert publishes msgs through ex by their statements, sts. Where ids is not nil it has a
// place for each message, and receives each row's id: the message's own where the table's id is
// not generated, otherwise the id its one-row statement hands back.
func insert(ctx context.Context, ex execer, d dialect.Dialect, t Table, msgs []Message, sts []statement, ids []int64) error {
	fail := func(st statement, err error) error {
		if len(sts) == 1 {
			return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d row(s): %w", len(msgs), err)
		}
		return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d rows: the statement of rows %d to %d: %w", len(msgs), st.first+1, st.first+st.rows, err)
	}
	for _, st := range sts {
		switch {
		case st.notify:
			if _, err := ex.ExecContext(ctx, st.query, st.args...); err != nil {
				return sentinel.Errorf(nil, sentinel.Table(t.Name), "publishing %d row(s): notifying its channel: %w", len(msgs), err)
			}
		case ids != nil && t.IDGenerated && d.Caps().Returning:
			if err := ex.QueryRowContext(ctx, st.query, st.args...).Scan(&ids[st.first]); err != nil {
				return fail(st, err)
			}
		case ids != nil && t.IDGenerated:
			res, err := ex.ExecContext(ctx, st.query, st.args...)
			if err == nil {
				ids[st.first], err = res.LastInsertId()
			}
			if err != nil {
				return fail(st, err)
			}
		default:
			if _, err := ex.ExecContext(ctx, st.query, st.args...); err != nil {
				return fail(st, err)
			}
		}
	}
	if ids != nil && !t.IDGenerated {
		for i, m := range msgs {
			ids[i] = m.ID
		}
	}
	return nil
}

// rowArgs are one message's values in the column order insert builds.
func rowArgs(t Table, d dialect.Dialect, m Message, now time.Time) ([]any, error) {
	var row []any
	if !t.IDGenerated {
		if m.ID == 0 {
			return nil, sentinel.Errorf(nil, sentinel.Table(t.Name), "its id column %q is not generated, so each Message needs an ID: set Message.ID or Table.IDGenerated", t.ID)
		}
		row = append(row, m.ID)
	}
	if t.Payload != "" {
		row = append(row, m.Payload)
	}
	if t.Queue != "" {
		row = append(row, m.Queue)
	}
	if t.Kind != "" {
		row = append(row, m.Kind)
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
	switch at, err := runAfter(t, m, now); {
	case err != nil:
		return nil, err
	case t.RetryAfter != "" && !at.IsZero():
		row = append(row, d.Time(at))
	case t.RetryAfter != "":
		row = append(row, nil)
	}
	if t.CreatedAt != "" {
		row = append(row, d.Time(now))
	}
	keys, err := keyArgs(t, m)
	if err != nil {
		return nil, err
	}
	return append(row, keys...), nil
}

// keyArgs are m's unique, group and limit keys, each where t has its column, in the column
// order insert builds. A key m sets where t has no column for it is refused (groupKey,
// limitKey).
func keyArgs(t Table, m Message) ([]any, error) {
	var row []any
	key, err := uniqueKey(t, m)
	if err != nil {
		return nil, err
	}
	if t.UniqueKey != "" {
		row = append(row, key)
	}
	if t.GroupKey != "" || m.GroupKey != "" {
		g, err := groupKey(t, m)
		if err != nil {
			return nil, err
		}
		row = append(row, g)
	}
	if t.LimitKey != "" || m.LimitKey != "" {
		k, err := limitKey(t, m)
		if err != nil {
			return nil, err
		}
		row = append(row, k)
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
