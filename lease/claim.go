package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
)

// Claim claims at most max due rows of the queue, in claim order (priority, retry_after, id, as
// the table has them), writing each a lease of now plus the lease length (the token) and
// counting its attempt, and commits before it returns. It reads the clock once. In transactional mode it then opens a
// transaction per delivery, at the dialect's level, and lends it to the handler as
// Delivery.Tx; if one cannot be opened, the claimed rows are given back and the error returned.
// On SQLite in transactional mode it claims one row at a time.
func (f *Form[D]) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	b := f.b
	if max < 1 {
		return nil, nil
	}
	if b.q.Transactional && f.d.Caps().OneWriter {
		// Each delivery's transaction would wait for the write lock of the one before it
		// (at once in immediate and exclusive mode), which this claim holds until its
		// handler has run: one at a time.
		max = 1
	}
	ds, token, err := f.claimRows(ctx, b, max)
	if err != nil {
		return nil, err
	}
	return f.keepRows(ctx, b, ds, token)
}

// keepRows gives each of ds, claimed under token, a hold of its own and, in transactional mode, a
// transaction, and keeps the holds for Close to give back; if a transaction cannot be opened, or
// Close ran meanwhile, every row is given back and the error returned.
func (f *Form[D]) keepRows(ctx context.Context, b *binding, ds []*inbox.Delivery, token time.Time) ([]*inbox.Delivery, error) {
	holds := make([]*hold, len(ds))
	for i, d := range ds {
		holds[i] = &hold{token: token, id: d.ID}
		inbox.SetHold(d, holds[i])
	}
	var failed error
	for i, d := range ds {
		if !b.q.Transactional {
			break
		}
		// The transaction outlives this call, and database/sql rolls a transaction back when
		// the context it began with ends: it must not end with the claim's.
		tx, err := f.d.Begin(context.WithoutCancel(ctx), b.db)
		if err != nil {
			failed = sentinel.Errorf(nil, sentinel.Table(f.t.Name), "opening the transaction of row %d: %w; the claimed rows were given back", d.ID, err)
			break
		}
		holds[i].tx, holds[i].lent = tx, d
		inbox.LendTx(tx, f.d, f.t.Name, d)
	}
	if failed == nil && f.life.Keep(holds...) {
		return ds, nil
	}
	if failed == nil {
		failed = sentinel.Errorf(inbox.ErrClosed, sentinel.Table(f.t.Name), "the form was closed during the claim; the claimed rows were given back")
	}
	errs := []error{failed}
	for _, h := range holds {
		h.mu.Lock()
		errs = append(errs, b.giveBack(context.WithoutCancel(ctx), h, h.id))
		h.mu.Unlock()
	}
	return nil, errors.Join(errs...)
}

// claimRows claims at most max rows under one token, read from the clock once, and commits.
func (f *Form[D]) claimRows(ctx context.Context, b *binding, max int) ([]*inbox.Delivery, time.Time, error) {
	now := b.q.Now()
	token := tokenAt(now.Add(b.lease))
	var ds []*inbox.Delivery
	var err error
	switch caps := f.d.Caps(); {
	case b.sql.ClaimsInOne():
		ds, err = f.claimInOne(ctx, b, max, now, token)
	case caps.OneWriter:
		ds, token, err = f.claimSQLite(ctx, b, max)
	default:
		// A deadlock, a lock wait timeout, or on a Galera node a certification failure at COMMIT
		// (1213, another node's claim took a row first): the transaction changed nothing, so
		// claim again, under a new token.
		err = conflict.Retry(ctx, f.d, func() (err error) {
			now = b.q.Now()
			token = tokenAt(now.Add(b.lease))
			ds, err = f.claimInTx(ctx, b, max, now, token)
			return err
		})
	}
	if err != nil {
		return nil, token, sentinel.Errorf(nil, sentinel.Table(f.t.Name), "claiming: %w", err)
	}
	return ds, token, nil
}

// claimValues are the values of a claim at now, of at most max rows, each written token: the
// queue and the kinds every claim binds (binding.claimed), now (the due and free predicates),
// the limit and the token. Each of the claim's statements binds those its parameters name.
func (f *Form[D]) claimValues(b *binding, max int, now, token time.Time) sqltext.Values {
	v := b.claimed
	v.Now, v.NowUs, v.Limit, v.Lease = f.d.Time(now), now.UnixMicro(), max, f.d.Time(token)
	return v
}

// tokenAt is the token for an expiry at t: as the database keeps it, UTC to the microsecond.
func tokenAt(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// claimInOne claims with one statement (Postgres), the claim of max rows, whose limit is in its
// text: one statement per size is prepared, the first time it is asked for. A consumer asks
// for 1 up to its workers, or its batch size. Over groups, where the claim comes back short
// (its pick reads a window of the first rows only, sqltext.Lease.Claim), a second statement
// claims the rest among every group's head and the rows of no group (sqltext.Lease.ClaimHeads),
// under the same token; where that one fails, the rows of the first, committed, are returned,
// and the next claim that comes back short runs it again.
func (f *Form[D]) claimInOne(ctx context.Context, b *binding, max int, now, token time.Time) ([]*inbox.Delivery, error) {
	ds, err := f.claimBy(ctx, b, "claim", b.sql.Claim, max, now, token)
	if err != nil || len(ds) == max || !b.sql.ClaimsHeads() {
		return ds, err
	}
	more, err := f.claimBy(ctx, b, "claim heads", b.sql.ClaimHeads, max-len(ds), now, token)
	if err != nil && len(ds) > 0 {
		return ds, nil
	}
	return append(ds, more...), err
}

// claimBy runs the claim statement what of n rows (query(n)) at now under token, and returns
// the rows it claimed.
func (f *Form[D]) claimBy(ctx context.Context, b *binding, what string, query func(int) sqltext.Statement, n int, now, token time.Time) ([]*inbox.Delivery, error) {
	claim, err := b.listStmt(ctx, what, query, n)
	if err != nil {
		return nil, err
	}
	v := f.claimValues(b, n, now, token)
	var ds []*inbox.Delivery
	err = b.query(ctx, claim, claim.Bind(nil, &v), func(rows *sql.Rows) (err error) {
		ds, err = b.st.Scan(rows)
		return err
	})
	return ds, err
}

// claimInTx claims in a READ COMMITTED transaction (MySQL, MariaDB): the SELECT locks the rows
// it returns, skipping rows other claims hold, and the UPDATE stamps them. The SELECT reads
// each attempt under the lock, so the attempt written is the one read plus one.
func (f *Form[D]) claimInTx(ctx context.Context, b *binding, max int, now, token time.Time) (ds []*inbox.Delivery, err error) {
	stamp, err := b.listStmt(ctx, "claim stamp", b.sql.Stamp, max)
	if err != nil {
		return nil, err
	}
	tx, done, err := b.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	defer func() {
		if err != nil {
			tx.Rollback() // after a failed Commit it does nothing
		}
	}()
	v := f.claimValues(b, max, now, token)
	ds, err = b.pickRated(ctx, tx, v, func() (picked, error) {
		rows, err := b.claim.QueryIn(ctx, tx, b.claim.Bind(nil, &v)...)
		if err != nil {
			return picked{}, err
		}
		return b.scanClaimed(rows)
	})
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, tx.Commit()
	}
	if waited := b.q.Now().Sub(now); waited > b.lease/2 {
		// The claim waited (for a lock, a cut connection) until the lease it would stamp has run
		// half out or more: its rows' groups and slots would free soon after they start, or
		// before, and another claim take them beside their handlers. They stay queued instead.
		b.log.Warn("inbox: a claim took longer than half its lease; its rows stay in the queue for the next claim", "table", f.t.Name, "queue", b.q.Name, "rows", len(ds), "waited", waited, "lease", b.lease)
		return nil, tx.Rollback()
	}
	// The statement takes max ids; a short claim repeats its last id (IN ignores repeats).
	v.IDs = make([]int64, max)
	for i := range v.IDs {
		v.IDs[i] = ds[min(i, len(ds)-1)].ID
	}
	if _, err = stamp.ExecIn(ctx, tx, stamp.Bind(make([]any, 0, 1+max), &v)...); err != nil {
		return nil, err
	}
	if err = tx.Commit(); err != nil {
		if errors.Is(err, inbox.ErrCommitUnknown) {
			err = fmt.Errorf("%w; if the claim committed, its rows return when their lease runs out", err)
		}
		return nil, err
	}
	counted(b, ds)
	return ds, nil
}

// claimLevel opens the MySQL and MariaDB claim's transaction at READ COMMITTED, whatever the
// dialect's level (which is the handlers' transactions').
var claimLevel = dialect.MySQL[isolation.ReadCommitted]{}

// begin opens a transaction outside the handlers' (the MySQL and MariaDB claim, and the batch
// settlement that must tell which rows it changed), at READ COMMITTED, on a pinned connection
// of the pool or, when the pool has none to spare, on the form's own connection; done must be
// called once the transaction has ended. A transaction whose end fails discards its
// connection (dialect.Begin, dialect.BeginOn); the own connection then takes another.
func (b *binding) begin(ctx context.Context) (tx dialect.Tx, done func(), err error) {
	if b.own.spare() {
		tx, err = claimLevelOn(b.st.D.Caps()).Begin(ctx, b.db)
		return tx, func() {}, err
	}
	return b.own.begin(ctx, claimLevelOn(b.st.D.Caps()))
}

// counted adds the attempt the stamp counted to deliveries read before it.
func counted(b *binding, ds []*inbox.Delivery) {
	if b.st.Q.Attempt != "" {
		for _, d := range ds {
			d.Attempt++
		}
	}
}

// claimSQLite claims in a write transaction (beginWrite), under the SQLite writer lock, and
// again after a transient conflict (another process held the database past the busy timeout).
// The transaction runs on a pinned connection, so its statements run by their text (the driver
// compiles a statement at every run, prepared or not). The clock is read once the transaction
// holds the write lock: BEGIN IMMEDIATE waits up to the busy timeout for another writer, and a
// token read before that wait would leave the rows less than their lease, or none at all.
//
// After a claim that took no row, the next one first runs the claim's SELECT outside any
// transaction (claimable), which in WAL mode takes no lock, and takes the write lock only where
// it found a row. Idle workers, and workers whose rows a full limit or held groups hold back,
// then poll without queueing for the database's one writer ahead of the settlements that would
// free them: with four processes of 8 workers under a limit of 3, their empty claims kept
// settlements waiting past a 1 s lease, and rows ran again.
func (f *Form[D]) claimSQLite(ctx context.Context, b *binding, max int) (ds []*inbox.Delivery, token time.Time, err error) {
	if b.idle.Load() {
		if found, err := f.claimable(ctx, b); err != nil || !found {
			return nil, time.Time{}, err
		}
	}
	defer func() { b.idle.Store(err == nil && len(ds) == 0) }()
	err = b.written(ctx, func() error {
		tx, err := beginWrite(ctx, b.db)
		if err != nil {
			return err
		}
		now := b.q.Now()
		token = tokenAt(now.Add(b.lease))
		if ds, err = f.pick(ctx, b, tx, max, now, token); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		if err = tx.Commit(); err != nil {
			ds = nil
		}
		return err
	})
	return ds, token, err
}

// claimable reports whether the claim's SELECT, run outside a transaction, finds a row.
func (f *Form[D]) claimable(ctx context.Context, b *binding) (bool, error) {
	now := b.q.Now()
	v := f.claimValues(b, 1, now, tokenAt(now.Add(b.lease)))
	rows, err := b.db.QueryContext(ctx, b.claimText.SQL, b.claimText.Bind(nil, &v)...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := rows.Next()
	return found, rows.Err()
}

// beginWrite opens the form's own write transactions on SQLite (a claim, and a settlement with
// the claim of the next row) with BEGIN IMMEDIATE, whatever the dialect's mode, which is the
// mode of the handlers' transactions: the write lock is taken at BEGIN, where the busy timeout
// waits for another process's writer, whereas a deferred transaction that read first fails at
// once when it comes to write after another process committed.
func beginWrite(ctx context.Context, db *sql.DB) (dialect.Tx, error) {
	return dialect.SQLite[isolation.Immediate]{}.Begin(ctx, db)
}

// pick runs the SQLite claim inside tx: the SELECT of at most max rows in claim order, then the
// stamp of the rows it read. The attempts of ds count this delivery only once tx commits.
func (f *Form[D]) pick(ctx context.Context, b *binding, tx dialect.Tx, max int, now, token time.Time) ([]*inbox.Delivery, error) {
	v := f.claimValues(b, max, now, token)
	ds, err := b.pickRated(ctx, tx, v, func() (picked, error) {
		rows, err := tx.QueryContext(ctx, b.claimText.SQL, b.claimText.Bind(nil, &v)...)
		if err != nil {
			return picked{}, err
		}
		return b.scanClaimed(rows)
	})
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	v.IDs = make([]int64, len(ds))
	for i, d := range ds {
		v.IDs[i] = d.ID
	}
	stamp := b.stampStatement(len(ds))
	if _, err := tx.ExecContext(ctx, stamp.SQL, stamp.Bind(make([]any, 0, 1+len(ds)), &v)...); err != nil {
		return nil, err
	}
	counted(b, ds)
	return ds, nil
}

// listKey names a statement over a list of ids: which statement, and how many ids.
type listKey struct {
	what string
	n    int
}

// listStmt returns statement what over n ids (query(n)): the one kept since it was first
// prepared (or checked; Open prepares the claim stamp for one id, the consumer's claim), or,
// where the pool has a connection to spare, the statement prepared now and kept; where it has
// none, the statement by its text, kept by no one, to run where the caller runs its statements
// (the form's own connection, a transaction's). Preparing takes a connection of the pool, which
// a caller must not wait for behind the handlers' transactions, and it runs outside the lock,
// so that no other call waits behind it. Claims and batches pad their id lists to the length
// they asked for (IN ignores repeats), so a consumer prepares about one statement per batch
// size.
func (b *binding) listStmt(ctx context.Context, what string, query func(n int) sqltext.Statement, n int) (*stmt.Stmt, error) {
	key := listKey{what, n}
	if s := b.kept(key); s != nil {
		return s, nil
	}
	if !b.own.spare() {
		return stmt.ByText(b.db, query(n)), nil
	}
	s, err := b.st.Statement(ctx, b.db, what, query(n))
	if err != nil {
		return nil, err
	}
	b.listedMu.Lock()
	defer b.listedMu.Unlock()
	if kept := b.listed[key]; kept != nil {
		s.Close() // another call prepared it meanwhile
		return kept, nil
	}
	b.listed[key] = s
	return s, nil
}

// kept returns the statement listStmt kept under key, or nil.
func (b *binding) kept(key listKey) *stmt.Stmt {
	b.listedMu.Lock()
	defer b.listedMu.Unlock()
	return b.listed[key]
}
