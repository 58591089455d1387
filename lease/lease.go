// Package lease is the lease form: a claim writes an expiry into the row (locked_until) and
// commits at once; the expiry is the ownership token every extension and settlement is guarded
// by. All four databases.
//
// No connection is held while a handler runs (except in transactional mode, where the
// handler's transaction holds one). Every transaction the form opens (the MySQL and MariaDB
// claim's, the handlers') runs on a connection pinned for it, which a failed COMMIT or ROLLBACK
// discards (dialect.Tx), so none stays open on a pooled connection. The consumer extends each lease every half lease, so a
// handler may run far longer than its lease; a consumer that stops extending (a crash, a
// partition) loses the row when its lease runs out, and another consumer claims it again. The
// first holder's settlement then changes nothing and fails with inbox.ErrLeaseLost: delivery is
// at least once, and a handler whose effects must not repeat should write them through the
// delivery's transaction in transactional mode, where they commit only while the lease holds.
// The first holder's consumer learns of the loss at its next extension, and then cancels the
// handler's context with a cause wrapping inbox.ErrLeaseLost (context.Cause(ctx) says so), so
// that the handler can stop work that is another consumer's now.
//
// On SQLite in transactional mode, a handler's transaction that has written (or was begun
// immediate or exclusive) holds the database's one write lock until it settles: extensions wait
// for it, and fail after the busy timeout, but no other consumer can claim the row meanwhile
// either, so the lease still holds when the Ack commits.
//
// Expiries are computed on the queue's clock (inbox.Binding.Clock) and compared with it: by
// default the host's, so the hosts that consume one table need clocks that agree to well within
// a lease, unless their consumers follow the database's clock (inbox.DatabaseClock).
//
// # Commits, shared
//
// A claim and a settlement commit apart, so the form shares commits where it can: on Postgres
// and SQLite, settlements of one kind that arrive while another runs share its next statement,
// whose RETURNING tells each whether its own row changed (each Settle still returns only once
// its row's statement has committed); on SQLite, the process's writes outside a transaction
// queue on one lock per *sql.DB rather than in SQLite's busy handler, and the form offers to
// settle a row and claim the next in one transaction (SettleAndClaim). Which settlements the
// consumer runs side by side, and when it fuses one with its next claim, the inbox package
// documentation says ("Where settlements run"). A guarded statement
// that meets a transient conflict (SQLITE_BUSY, a deadlock) runs again, a few times: the token
// guard makes that safe.
//
// # Durability
//
// On Postgres a claim and an extension commit without waiting for the disk: each statement turns
// synchronous_commit off for its own transaction (dialect.Caps.UnflushedCommit), which saves a
// flush (about a third of a millisecond on a local disk) per message. A server crash may forget
// them, and that costs at most a second delivery: a forgotten claim leaves its rows claimable,
// a forgotten extension leaves the lease before it, which runs out sooner; either way the first
// holder's settlement then finds its token gone (inbox.ErrLeaseLost) and changes nothing.
// Settlements wait for the disk, except, where inbox.Config.UnflushedAcks asks, an Ack or a Drop
// outside transactional mode, whose row a crash may then deliver again once its lease runs out.
// An Ack in transactional mode commits the handler's writes and always waits, and a commit that
// waits makes the commits before it durable too (the server's log is one sequence).
//
// # The pool
//
// database/sql hands a freed connection to any request waiting for one, picked at random, so
// handlers that take every connection of the pool could keep an extension waiting until its
// lease ran out. Where the pool is bounded and has room (two connections or more, three in
// transactional mode), the form keeps one connection of its own from Open to Close
// (inbox.Plan.OwnConnection), which the consumer counts in its budget: its statements run on
// the pool, side by side, while the pool has a connection to spare, and on its own connection,
// one at a time, while it has none. SQLite's claims (and the claim a settlement fuses with)
// still take their connection from the pool.
//
// The lease column holds a timestamp: TIMESTAMPTZ on Postgres, DATETIME(6) on MySQL and
// MariaDB, TEXT on SQLite. The token is compared to the microsecond, so the column must keep
// them: Open refuses TIMESTAMPTZ(0) or (3), TIMESTAMP(0), DATETIME or DATETIME(3), naming the
// ALTER TABLE that fixes the column, and on SQLite a STRICT table whose lease column is not
// TEXT. It is NULL while no one holds the row.
//
// # Behind a pooler
//
// With inbox.Config.UnpreparedStatements the form prepares nothing: Open checks each statement
// by EXPLAIN, and every run sends the statement's text, on the pool as on its own connection,
// as PgBouncer in transaction pooling (before 1.21) needs.
package lease

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/formlife"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// Config tunes the lease form. The zero value (or nil) takes the defaults.
type Config struct {
	// Lease is how long a claim holds its row before another consumer may take it; the consumer
	// extends it every half lease while the handler runs. Once the handler has returned, the
	// lease is no longer extended while the settlement waits to commit: a lease shorter than
	// that wait (SQLite's one writer shared by several busy processes, a loaded server) lets the
	// row run again. Whole seconds, at least one. Default 30 s.
	Lease time.Duration
	// GroupsStayBlocked keeps a FIFO group (inbox.Table.GroupKey) blocked when its head dies
	// in work: the dead row stays its group's holder, and no later row of the group runs until
	// an operator requeues the dead row (it runs again), purges it, or unblocks the group
	// (admin.UnblockGroup, inbox groups unblock), which leaves it dead and lets the next row
	// go. It needs the table's DeadAt column (without one a dying row is dropped, and cannot
	// stay): Open refuses it otherwise. Give every consumer of the queue the same setting: a
	// consumer without it lets the group go on. Default false: a dead head lets the next row go.
	GroupsStayBlocked bool
	// GroupsRoundRobin spreads claims across FIFO groups: among the rows a claim may take, the
	// group claimed longest ago goes first (after the priority, where the table has one), so
	// that one worker alternates between groups rather than draining the group of the lowest
	// ids first. Each claim then reads and sorts every row of the queue it may take, where the
	// usual order stops at the first it needs (docs/groups.md says what it costs). Default
	// false: claims go in the usual order.
	GroupsRoundRobin bool
}

// DefaultLease is the lease a zero Config.Lease takes.
const DefaultLease = 30 * time.Second

// Form is the lease form over one table. It implements inbox.Form; a Consumer drives it.
//
// Statements, per database (each guarded settlement says WHERE id = ? AND locked_until = token):
//
//	Postgres         claim: one WITH … SELECT … FOR UPDATE SKIP LOCKED … UPDATE … RETURNING;
//	                 over FIFO groups, a second over every group's head where the first, which
//	                 reads the first rows in claim order only, comes back short
//	MySQL, MariaDB   claim: a READ COMMITTED transaction: SELECT … FOR UPDATE SKIP LOCKED, then
//	                 UPDATE … WHERE id IN (…), then COMMIT
//	SQLite           claim: a BEGIN IMMEDIATE transaction: SELECT … LIMIT n, then
//	                 UPDATE … WHERE id IN (…), then COMMIT; after a claim that took no
//	                 row, the SELECT alone first, outside a transaction, and the
//	                 transaction only where it finds a row
//	all              extend: UPDATE SET locked_until = new token, guarded
//	                 ack, drop: DELETE, or SET processed_at, locked_until = NULL; guarded
//	                 retry, release: SET locked_until = NULL, guarded
//	                 retry after: SET retry_after, locked_until = NULL, guarded
//
// A claim counts the attempt, so a retry only clears the lease.
//
// Batches (ClaimBatch, for inbox.NewBatchConsumer) run the same claim with a larger limit and
// write one token into every row of the batch; extensions and settlements then name the
// batch's ids (WHERE id IN (…) AND locked_until = token), one statement per kind of outcome,
// so a batch of 16 acked rows costs one claim and one DELETE. A row whose lease ran out and
// was taken no longer matches the token: it is left alone, and the others settle; the error, an
// *inbox.LeaseLostError, names exactly the rows left alone. To know them, each settlement
// returns the ids it changed (RETURNING) on Postgres and SQLite, and on MySQL and MariaDB runs
// in a transaction, committed when it changed every row it names (otherwise see SettleBatch).
type Form[D dialect.Dialect] struct {
	d   D
	t   inbox.Table
	cfg Config

	life *formlife.Life[*hold]
	b    *binding // Open's; read by the calls life admits
}

// For returns the lease form over c's table, on c's database, configured by cfg (nil: the
// defaults): the form a consumer of c (inbox.Client.NewConsumer) holds its rows by, as New
// returns it.
func For[D dialect.Dialect](c *inbox.Client[D], cfg *Config) *Form[D] {
	return New(c.Dialect(), c.Table(), cfg)
}

// New returns the lease form over table t, whose LockedUntil column (locked_until where it is
// empty) holds each row's lease. Nothing is checked until Open.
func New[D dialect.Dialect](d D, t inbox.Table, cfg *Config) *Form[D] {
	if t.LockedUntil == "" {
		t.LockedUntil = DefaultColumn
	}
	f := &Form[D]{d: d, t: t, life: formlife.New[*hold](sentinel.Errorf(inbox.ErrClosed, sentinel.Table(t.Name), "the lease form is not open: Open it (a Consumer does) before claiming or settling"))}
	if cfg != nil {
		f.cfg = *cfg
	}
	return f
}

// DefaultColumn is the lease form's column where inbox.Table.LockedUntil is empty.
const DefaultColumn = "locked_until"

// binding is what Open binds the form to, until Close.
type binding struct {
	db    *sql.DB
	q     inbox.Binding
	log   *slog.Logger
	st    *stmt.Table
	lease time.Duration
	sql   sqltext.Lease
	// acked builds the statements of an Ack (and of a Drop, which settles by the same): sql, or
	// outside transactional mode where inbox.Binding.UnflushedAcks asks, sql.Unflushed().
	acked sqltext.Lease
	// claimText is the claim's text: SQLite's claim runs it by its text (see prepare).
	claimText sqltext.Statement
	// claimed are the values every claim binds (the queue: stmt.Table.ClaimValues);
	// a claim sets the rest on a copy (claimValues).
	claimed sqltext.Values

	// The statements, prepared or run by their text (inbox.Binding.UnpreparedStatements). claim
	// is the pick of MySQL and MariaDB; nil on SQLite, and on Postgres, whose claims are one
	// per size (claimInOne). retryAfter and dead are nil without their column.
	claim, extend, ack, retry, retryAfter, dead *stmt.Stmt
	cancel                                      *stmt.Stmt // nil where the table has no CancelledAt
	// takeHeld and takeFree take a group's hold between the pick and the stamp, where the table
	// has groups and the claim is not one statement (MySQL, MariaDB, SQLite); nil elsewhere.
	takeHeld, takeFree *stmt.Stmt
	// readSlots, takeSlot and newSlot read a limit's slots and take one between the pick and
	// the stamp, where the description names a limits table; nil elsewhere.
	readSlots, takeSlot, newSlot *stmt.Stmt
	// rateOf, freeSlots and takeSlot take start slots between the pick and the stamp, where the
	// description names a rates table (see rates.go); nil elsewhere. keyRate asks whether a
	// limit key has a rate, where the table also has a limit key column; nil elsewhere.
	rateOf, freeSlots, takeStart, keyRate *stmt.Stmt

	acks, retries *merger // Postgres and SQLite: settlements that arrive together share a statement

	shape settleplan.Table // what the table records of an outcome, for settleplan

	writer *sync.Mutex // SQLite: this process's one writer to the database (see package sqlitewriter)
	// idle is set while this binding's last claim on SQLite took no row: the next claim reads
	// first whether any row is claimable (claimSQLite).
	idle atomic.Bool
	own  *ownConn // nil where the pool is unbounded or too small to keep one (keepOwn)

	listedMu sync.Mutex
	listed   map[listKey]*stmt.Stmt    // statements over an id list: by statement and list length
	stamps   map[int]sqltext.Statement // SQLite: the claim's stamp by its number of ids

	life *formlife.Life[*hold] // the form's: its holds not yet ended, which Close gives back
}

// hold is a delivery's Hold: its lease token and, in transactional mode, the handler's
// transaction.
type hold struct {
	mu    sync.Mutex
	token time.Time       // the expiry last committed into the row, UTC, to the microsecond
	tx    dialect.Tx      // transactional mode, until the settlement takes it
	lent  *inbox.Delivery // a delivery tx is lent to (a batch's deliveries share one loan), or nil
	// txToken is the expiry an extension wrote inside tx (SQLite only, see Extend); it holds
	// only if tx commits. Zero when none was written.
	txToken time.Time
	ended   bool  // settled, released or given back at Close
	id      int64 // the row's id; a batch's first row's
	// batch holds the ids of a batch's rows, which all share this hold; nil for a single
	// delivery. Statements over the batch pad the list to size ids.
	batch []int64
	size  int
	args  rowArgs // the arguments of a statement over the hold's rows, under mu (guard)
}

// current is the token the row holds as seen from inside the delivery's transaction.
func (h *hold) current() time.Time {
	if !h.txToken.IsZero() {
		return h.txToken
	}
	return h.token
}

// Open checks the form against the server and prepares every statement it runs, or where
// q.UnpreparedStatements asks checks each by EXPLAIN without preparing it. It fails with
// an error wrapping inbox.ErrDialect for a pair the database cannot run (transactional mode on
// Postgres at repeatable read or serializable), inbox.ErrServerTooOld for an old server, and
// inbox.ErrSchema for a table, column or column type that does not fit.
func (f *Form[D]) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	var plan inbox.Plan
	err := f.life.Open(func() error {
		return sentinel.Errorf(inbox.ErrAlreadyConsuming, sentinel.Table(f.t.Name), "this lease form is already open: build one form per consumer")
	}, func() (err error) {
		plan, err = f.bind(ctx, db, q)
		return err
	})
	return plan, err
}

// leaseFor is the lease the form's claims take for q: Config.Lease, or DefaultLease. It refuses
// a lease that is not a whole number of seconds, and a transactional q where the form's level
// is a snapshot.
func (f *Form[D]) leaseFor(q inbox.Binding) (time.Duration, error) {
	lease := f.cfg.Lease
	if lease == 0 {
		lease = DefaultLease
	}
	if lease < time.Second || lease%time.Second != 0 {
		return 0, sentinel.Errorf(nil, sentinel.Table(f.t.Name), "lease %v is not a whole number of seconds of at least 1s: set lease.Config.Lease to one (or leave it zero for %v)", f.cfg.Lease, DefaultLease)
	}
	if caps := f.d.Caps(); q.Transactional && slices.Contains(caps.SnapshotLevels, f.d.Level()) {
		return 0, sentinel.Errorf(inbox.ErrDialect, sentinel.Table(f.t.Name), "the lease form on %s at %s cannot run transactional: use isolation.ReadCommitted; see docs/errors.md#dialect", caps.Title, f.d.Level())
	}
	return lease, nil
}

// bind checks the form against the server, prepares its statements and binds it to db and q.
func (f *Form[D]) bind(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	if err := f.d.Allows(dialect.LeaseForm); err != nil {
		return inbox.Plan{}, sentinel.At(sentinel.Queue(f.t.Name, q.Name), err)
	}
	lease, err := f.leaseFor(q)
	if err != nil {
		return inbox.Plan{}, err
	}
	caps := f.d.Caps()
	column := f.t.LockedUntil
	st, err := stmt.New(f.d, f.t)
	if err != nil {
		return inbox.Plan{}, err
	}
	st.Claiming(q)
	col, err := f.d.Quote(column)
	if err != nil {
		return inbox.Plan{}, sentinel.Errorf(inbox.ErrSchema, "", "table %q, lease column: %v", f.t.Name, err)
	}
	if err := f.d.CheckServer(ctx, db); err != nil {
		return inbox.Plan{}, sentinel.At(sentinel.Queue(f.t.Name, q.Name), err)
	}
	if err := f.checkGroupOptions(q.Name); err != nil {
		return inbox.Plan{}, err
	}
	if err := f.verify(ctx, db, column, q); err != nil {
		return inbox.Plan{}, err
	}

	b := &binding{
		db: db, q: q, log: q.Logger, st: st, lease: lease,
		sql:     f.groupOptions(st.SQL().Lease(col)),
		listed:  map[listKey]*stmt.Stmt{},
		stamps:  map[int]sqltext.Statement{},
		claimed: st.ClaimValues(q.Name),
		life:    f.life,
	}
	b.claimed.Table = f.t.Name // the group holds' key
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.acked = b.sql
	if q.UnflushedAcks && !q.Transactional {
		// In transactional mode the ack commits the handler's writes, which are the user's.
		b.acked = b.sql.Unflushed()
	}
	// Taken before the statements are prepared, so that they are prepared on another
	// connection, which the pool's statements then find them on.
	if b.own, err = keepOwn(ctx, db, q.Transactional); err != nil {
		return inbox.Plan{}, sentinel.Errorf(nil, sentinel.Queue(f.t.Name, q.Name), "taking the form's own connection from the pool: %w", err)
	}
	if err := b.prepare(ctx); err != nil {
		b.closeStatements()
		return inbox.Plan{}, err
	}
	b.shape = settleplan.Table{
		ProcessedAt: st.Q.ProcessedAt != "", DeadAt: b.dead != nil, RetryAfter: b.retryAfter != nil,
		LastError: st.Q.LastError != "", RetryWrites: true, // a retry clears the lease
		CancelledAt: b.cancel != nil,
	}
	if caps.OneWriter {
		b.writer = sqlitewriter.For(db)
	}
	if caps.Returning {
		b.acks = newMerger(b, "ack", b.acked, outcome.KindAck, b.ack, func() sqltext.Values {
			return b.shape.Values(settleplan.Step{Kind: outcome.KindAck}, b.q.Now(), f.d.Time)
		})
		b.retries = newMerger(b, "retry", b.sql, outcome.KindRetry, b.retry, func() sqltext.Values { return sqltext.Values{} })
	}
	f.b = b
	plan := inbox.Plan{
		Table:           f.t.Name,
		Form:            dialect.LeaseForm.String(),
		ExtendEvery:     lease / 2,
		HoldsConnection: q.Transactional,
		OwnConnection:   b.own != nil,
		SerialClaims:    caps.OneWriter,
		Dialect:         f.d,
		Described:       f.t,
		FindUnclaimable: f.FindUnclaimable,
	}
	if caps.OneWriter && !q.Transactional {
		plan.SettleAndClaim = f.SettleAndClaim
	}
	return plan, nil
}

// verify checks the table's column types (schema.Verify) and the side tables its description
// asks for: the group holds', the limits' and slots', the rates' (schema.CheckGroups,
// CheckLimits, CheckRates).
func (f *Form[D]) verify(ctx context.Context, db *sql.DB, column string, q inbox.Binding) error {
	if err := schema.Verify(ctx, db, f.d, f.t, column, q); err != nil {
		return err
	}
	where := sentinel.Queue(f.t.Name, q.Name)
	if err := schema.CheckGroups(ctx, db, f.d, f.t, where); err != nil {
		return err
	}
	if err := schema.CheckLimits(ctx, db, f.d, f.t, where, true); err != nil {
		return err
	}
	return schema.CheckRates(ctx, db, f.d, f.t, where)
}

// prepare prepares (or checks, see stmt.Table.Statement) every statement the binding runs; a
// failure names the statement and wraps inbox.ErrSchema.
func (b *binding) prepare(ctx context.Context) error {
	var err error
	prep := func(what string, query sqltext.Statement) *stmt.Stmt {
		if err != nil || query.Empty() {
			return nil
		}
		var s *stmt.Stmt
		s, err = b.st.Statement(ctx, b.db, what, query)
		return s
	}
	b.claimText = b.sql.Claim(1)
	switch caps := b.st.D.Caps(); {
	case caps.BeginsByStatement:
		// The claim runs inside a transaction on a pinned connection, where a statement the
		// pool prepared cannot run: it is only checked against the schema here.
		if err = b.st.Check(ctx, b.db, "claim", b.claimText.SQL); err == nil {
			err = b.st.Check(ctx, b.db, "claim stamp", b.sql.Stamp(1).SQL)
		}
	case b.sql.ClaimsInOne():
		// The claim of one row, the consumer's first; the other sizes as first asked for.
		b.listed[listKey{"claim", 1}] = prep("claim", b.claimText)
		if b.sql.ClaimsHeads() {
			b.listed[listKey{"claim heads", 1}] = prep("claim heads", b.sql.ClaimHeads(1))
		}
	default:
		b.claim = prep("claim", b.claimText)
		b.listed[listKey{"claim stamp", 1}] = prep("claim stamp", b.sql.Stamp(1))
	}
	one := sqltext.ByIDAndToken()
	b.extend = prep("extend", b.sql.Extend(one))
	b.ack = prep("ack", b.acked.Settle(outcome.KindAck, one))
	b.retry = prep("retry", b.sql.Settle(outcome.KindRetry, one))
	b.retryAfter = prep("retry after", b.sql.Settle(outcome.KindRetryAfter, one))
	b.dead = prep("fail", b.sql.Settle(outcome.KindFail, one))
	b.cancel = prep("cancel", b.sql.Settle(outcome.KindCancel, one))
	if err != nil {
		return err
	}
	if err := b.prepareTakes(ctx); err != nil {
		return err
	}
	if err := b.prepareSlots(ctx); err != nil {
		return err
	}
	return b.prepareRates(ctx)
}

// closeStatements frees the prepared statements and gives the own connection back.
func (b *binding) closeStatements() error {
	errs := []error{b.own.close()}
	for _, s := range []*stmt.Stmt{b.claim, b.extend, b.ack, b.retry, b.retryAfter, b.dead, b.cancel, b.takeHeld, b.takeFree, b.readSlots, b.takeSlot, b.newSlot, b.rateOf, b.freeSlots, b.takeStart, b.keyRate} {
		errs = append(errs, s.Close())
	}
	b.listedMu.Lock()
	for _, s := range b.listed {
		errs = append(errs, s.Close())
	}
	b.listedMu.Unlock()
	return errors.Join(errs...)
}

// Close gives back every hold still open (rolling back its transaction and clearing its lease,
// so the row is claimable at once), then frees the prepared statements. Later calls fail with
// inbox.ErrClosed until the form is opened again.
func (f *Form[D]) Close() error {
	return f.life.Close(func(h *hold) error {
		h.mu.Lock() // waits out an extension or settlement of the hold in flight
		defer h.mu.Unlock()
		if h.ended {
			return nil
		}
		// A lease that ran out has nothing to give back: its row is another consumer's or free.
		if err := f.b.giveBack(context.Background(), h, h.id); !errors.Is(err, inbox.ErrLeaseLost) {
			return err
		}
		return nil
	}, func() error { return f.b.closeStatements() })
}

// FindUnclaimable searches the queue for rows that no claim takes as they stand (see
// inbox.Unclaimable), with reads of their own, outside the SQLite writer lock, that lock
// nothing.
func (f *Form[D]) FindUnclaimable(ctx context.Context) ([]inbox.Unclaimable, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	b := f.b
	return b.st.FindUnclaimable(ctx, b.db, b.q.Name, b.q.Now())
}

// exec runs one of the binding's statements outside a transaction, on the pool or, when it
// has no connection to spare, on the form's own connection, under the SQLite writer lock, and
// again after a transient conflict.
func (b *binding) exec(ctx context.Context, s *stmt.Stmt, args ...any) (res sql.Result, err error) {
	err = b.written(ctx, func() (err error) {
		if b.own.spare() {
			res, err = s.ExecContext(ctx, args...)
		} else {
			res, err = b.own.exec(ctx, s, args)
		}
		return err
	})
	return res, err
}

// written runs write under the SQLite writer lock, and again after a transient conflict (see
// conflict.Retry): the token guard lets a guarded statement change a row only while its lease
// holds, so running it again is safe.
func (b *binding) written(ctx context.Context, write func() error) error {
	return conflict.Retry(ctx, b.st.D, func() error {
		unlock := b.write()
		defer unlock()
		return write()
	})
}

// write takes the SQLite writer lock, where there is one, and returns its release.
func (b *binding) write() (unlock func()) {
	if b.writer == nil {
		return func() {}
	}
	b.writer.Lock()
	return b.writer.Unlock
}

// query runs one of the binding's statements that return rows outside a transaction, on the
// pool or the form's own connection as exec does, under the SQLite writer lock until read holds
// the rows read and closed (SQLite writes as the rows are stepped through), and again after a
// transient conflict that came before any row.
func (b *binding) query(ctx context.Context, s *stmt.Stmt, args []any, read func(*sql.Rows) error) error {
	return b.written(ctx, func() error {
		if !b.own.spare() {
			return b.own.query(ctx, s, args, read)
		}
		rows, err := s.QueryContext(ctx, args...)
		return readRows(rows, err, read)
	})
}

// readRows hands the rows of a query that returned err to read, and closes them.
func readRows(rows *sql.Rows, err error, read func(*sql.Rows) error) error {
	if err != nil {
		return err
	}
	err = read(rows)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// stampStatement is the SQLite claim's stamp over n ids, written once per n.
func (b *binding) stampStatement(n int) sqltext.Statement {
	b.listedMu.Lock()
	defer b.listedMu.Unlock()
	st, ok := b.stamps[n]
	if !ok {
		st = b.sql.Stamp(n)
		b.stamps[n] = st
	}
	return st
}
