package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

// The raw loops: what a careful engineer would write by hand with database/sql, running the
// statements each form runs. Every statement is built by internal/sqltext, the package that
// builds the forms' own, for the bench table (no group, priority, retry_after or processed_at
// column, so the claim's predicate is "1 = 1" and the order is the id): raw loop and library run
// the same SQL by construction. What a loop does with the statements follows the database's
// capabilities (dialect.Caps), as the forms do. Statements are prepared once on the pool where
// the form prepares them too, and rebound to a transaction with tx.StmtContext; the advisory
// loop runs its statements by text on the pinned connection, as the form does, since
// database/sql cannot rebind a prepared statement to an *sql.Conn.
//
// A batch runs what the form's ClaimBatch and SettleBatch run: one claim with LIMIT n (the
// lease form's separate stamp over an IN list of the ids, padded to n by repeating the last),
// and one settlement: a DELETE over an IN list of the ids (guarded by the lease token, padded as
// the stamp), except the row lock form where an id list does not settle (IDListSettles false:
// MySQL, MariaDB), which deletes each row on its id in the batch's transaction, and the advisory
// form, whose DELETE names exactly the rows taken and which then releases every key of the
// batch in one statement.

// rawLoop claims and settles rows of one table. step claims up to batch rows, hands each to the
// handler and settles them, and returns how many it handled.
type rawLoop interface {
	step(ctx context.Context, batch int, handle func()) (int, error)
	close()
}

// rawDrain is one drain of the raw loop: msgs/s, heap allocations per message after the
// loop's statements were prepared, and with -count-trips what it sent, its statements'
// preparing and closing included.
type rawDrain struct {
	rate, allocs float64
	traffic      harness.Traffic
}

// drainRaw prefills the cell's table with cfg.n rows and drains it with c.workers goroutines
// each running the raw loop until every row is handled; an empty claim while rows remain (they
// are in another goroutine's hands) waits a millisecond. The time runs from the first claim, the
// loop's statements prepared before it. A failed drain check returns the drain's allocations.
func drainRaw(ctx context.Context, t *harness.Target, c *cell, cfg *config, bar *harness.Bar) (rawDrain, error) {
	var d rawDrain
	n := cfg.n
	table := benchTable(t, c.form)
	if err := t.Prefill(ctx, table, n); err != nil {
		return d, fmt.Errorf("prefilling: %w", err)
	}
	meter, err := t.StartMeter(ctx)
	if err != nil {
		return d, err
	}
	loop, err := cellLoop(ctx, t, c, cfg, table)
	if err != nil {
		return d, err
	}
	defer loop.close()

	want := int64(n)
	var handled, conflicts atomic.Int64
	handle := func() {} // the handler does nothing, as the library cells' handler
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mallocs := harness.Mallocs()
	start := time.Now()
	for range c.workers {
		wg.Go(func() {
			for handled.Load() < want && runCtx.Err() == nil {
				n, err := loop.step(runCtx, c.batch, handle)
				if err != nil && t.D.Retryable(err) {
					// A conflict rolled the step back: its rows are claimable again.
					if conflicts.Add(1) == 1 {
						bar.Logf("%s %s raw batch %d: a conflict, retried: %v", t.Name, c.form, c.batch, err)
					}
					continue
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				handled.Add(int64(n))
				bar.Add(int64(n))
				if n == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	d.allocs = float64(harness.Mallocs()-mallocs) / float64(want)
	if firstErr != nil {
		return d, firstErr
	}
	if err := ctx.Err(); err != nil {
		return d, err
	}
	// The statements close inside the window, as the library's do inside its Run.
	loop.close()
	if d.traffic, err = meter.Stop(ctx); err != nil {
		return d, err
	}
	if err := t.CheckDrained(ctx, table, handled.Load(), want); err != nil {
		return d, err
	}
	d.rate = float64(want) / elapsed.Seconds()
	return d, nil
}

// statements is the bench table's statement builder, with its lease column and its id quoted.
type statements struct {
	sqltext.SQL
	caps      *dialect.Caps
	table     string // unquoted
	lease, id string
	// unflushedAcks: the loops ack by the statements the forms run with Config.UnflushedAcks.
	unflushedAcks bool
}

func newStatements(t *harness.Target, table string) (*statements, error) {
	tbl, err := harness.Table(table).Quote(t.D)
	if err != nil {
		return nil, err
	}
	lease, err := t.D.Quote(harness.LeaseColumn)
	if err != nil {
		return nil, err
	}
	caps := t.D.Caps()
	return &statements{SQL: sqltext.New(caps, sqltext.Table(tbl)), caps: caps, table: table, lease: lease, id: tbl.ID}, nil
}

// leaseStatements is the lease form's builder over the bench table, Unflushed where the loop
// acks as the form does with Config.UnflushedAcks (only its settlements change).
func (s *statements) leaseStatements() sqltext.Lease {
	ls := s.Lease(s.lease)
	if s.unflushedAcks {
		return ls.Unflushed()
	}
	return ls
}

// rowLockAcks is the row lock form's builder of its acks over the bench table, Unflushed where
// the loop acks as the form does with Config.UnflushedAcks (every row of the loop acks, so the
// ack is its transaction's only change, as the form requires).
func (s *statements) rowLockAcks() sqltext.RowLock {
	if s.unflushedAcks {
		return s.RowLock().Unflushed()
	}
	return s.RowLock()
}

// advisoryAcks is the advisory form's builder of its acks, Unflushed where the loop acks as the
// form does with Config.UnflushedAcks.
func (s *statements) advisoryAcks(a sqltext.Advisory) sqltext.Advisory {
	if s.unflushedAcks {
		return a.Unflushed()
	}
	return a
}

// ids pads ids to n arguments by repeating the last (IN ignores repeats), after the leading
// arguments lead.
func ids(lead []any, got []int64, n int, tail ...any) []any {
	args := append([]any{}, lead...)
	for i := range n {
		args = append(args, got[min(i, len(got)-1)])
	}
	return append(args, tail...)
}

// newRawLoop builds the raw loop of form over table; unflushedAcks has the loop ack by the
// statements the form runs with Config.UnflushedAcks.
func newRawLoop(ctx context.Context, t *harness.Target, form, table string, batch int, unflushedAcks bool) (rawLoop, error) {
	s, err := newStatements(t, table)
	if err != nil {
		return nil, err
	}
	s.unflushedAcks = unflushedAcks
	var l rawLoop
	switch {
	case form == "rowlock":
		l, err = newRawRowLock(ctx, t, s, batch)
	case form == "lease" && s.caps.UpdateFrom:
		l, err = newRawLeaseOneStatement(ctx, t, s, batch)
	case form == "lease":
		l, err = newRawLeasePicked(ctx, t, s, batch)
	default:
		l, err = newRawAdvisory(ctx, t, s)
	}
	if err != nil {
		return nil, fmt.Errorf("preparing the raw loop's statements: %w", err)
	}
	return l, nil
}

// stmts prepares statements and closes them together.
type stmts []*sql.Stmt

func (ss *stmts) prepare(ctx context.Context, db *sql.DB, query string, err *error) *sql.Stmt {
	if *err != nil {
		return nil
	}
	st, e := db.PrepareContext(ctx, query)
	if e != nil {
		*err = fmt.Errorf("%w (statement: %s)", e, query)
		return nil
	}
	*ss = append(*ss, st)
	return st
}

func (ss stmts) close() {
	for _, st := range ss {
		st.Close()
	}
}

// txOptions is how the forms begin a transaction at the dialect's default level: READ COMMITTED
// where that is the default (MySQL, MariaDB), a plain BEGIN elsewhere.
func txOptions(c *dialect.Caps) *sql.TxOptions {
	if c.DefaultReadCommitted {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// rawRowLock: BEGIN; SELECT … ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED; handle; DELETE; COMMIT.
// A batch deletes its rows with one DELETE … IN where an id list settles (Postgres), and row by
// row elsewhere, as the form does (InnoDB may take an IN list through a scan that waits on the
// rows other batches hold).
type rawRowLock struct {
	t          *harness.Target
	tx         *sql.TxOptions
	claim, ack *sql.Stmt
	inList     bool // ack deletes a batch's rows over an IN list
	stmts
}

func newRawRowLock(ctx context.Context, t *harness.Target, s *statements, batch int) (*rawRowLock, error) {
	l := &rawRowLock{t: t, tx: txOptions(s.caps), inList: batch > 1 && s.caps.IDListSettles}
	rl, acks := s.RowLock(), s.rowLockAcks()
	var err error
	l.claim = l.prepare(ctx, t.DB, rl.Claim(batch).SQL, &err)
	if l.inList {
		l.ack = l.prepare(ctx, t.DB, acks.Settle(outcome.KindAck, sqltext.ByIDs(batch)).SQL, &err)
	} else {
		l.ack = l.prepare(ctx, t.DB, acks.Settle(outcome.KindAck, sqltext.ByID()).SQL, &err)
	}
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

func (l *rawRowLock) step(ctx context.Context, batch int, handle func()) (int, error) {
	tx, err := l.t.DB.BeginTx(ctx, l.tx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	got, err := scanDeliveries(tx.StmtContext(ctx, l.claim).QueryContext(ctx))
	if err != nil || len(got) == 0 {
		return 0, err
	}
	for range got {
		handle()
	}
	ack := tx.StmtContext(ctx, l.ack)
	if l.inList {
		if _, err := ack.ExecContext(ctx, ids(nil, got, batch)...); err != nil {
			return 0, err
		}
	} else {
		for _, id := range got {
			if _, err := ack.ExecContext(ctx, id); err != nil {
				return 0, err
			}
		}
	}
	return len(got), tx.Commit()
}

// scanDeliveries reads id, payload, attempt rows (sqltext's Columns for the bench table) and
// returns the ids.
func scanDeliveries(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var got []int64
	for rows.Next() {
		var (
			id      int64
			payload []byte
			attempt sql.NullInt64
		)
		if err := rows.Scan(&id, &payload, &attempt); err != nil {
			return nil, err
		}
		got = append(got, id)
	}
	return got, rows.Err()
}

// leaseToken is a claim's token: now plus the form's default lease of 30 s, to the microsecond.
func leaseToken(now time.Time) time.Time {
	return now.Add(30 * time.Second).UTC().Truncate(time.Microsecond)
}

// rawLeaseOneStatement, where an UPDATE joins a WITH query (Postgres): one WITH … FOR UPDATE
// SKIP LOCKED … UPDATE … RETURNING claim, committed at once; then a DELETE guarded by the token
// per row (or one for the batch).
type rawLeaseOneStatement struct {
	t          *harness.Target
	claim, ack *sql.Stmt
	stmts
}

func newRawLeaseOneStatement(ctx context.Context, t *harness.Target, s *statements, batch int) (*rawLeaseOneStatement, error) {
	l := &rawLeaseOneStatement{t: t}
	ls := s.leaseStatements()
	var err error
	l.claim = l.prepare(ctx, t.DB, ls.Claim(batch).SQL, &err)
	l.ack = l.prepare(ctx, t.DB, leaseAck(ls, batch), &err)
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

// leaseAck is the lease form's Ack of one row, or of a batch of n, under its token.
func leaseAck(ls sqltext.Lease, n int) string {
	if n == 1 {
		return ls.Settle(outcome.KindAck, sqltext.ByIDAndToken()).SQL
	}
	return ls.Settle(outcome.KindAck, sqltext.ByIDsAndToken(n)).SQL
}

func (l *rawLeaseOneStatement) step(ctx context.Context, batch int, handle func()) (int, error) {
	now := time.Now()
	token := leaseToken(now)
	got, err := scanDeliveries(l.claim.QueryContext(ctx, l.t.D.Time(now), l.t.D.Time(token))) // the limit is in the claim's text
	if err != nil || len(got) == 0 {
		return 0, err
	}
	return settleLeased(ctx, l.t, l.ack, got, batch, token, handle)
}

// settleLeased hands each leased row to the handler and deletes it, guarded by its token: one
// DELETE per row, as the form settles, or one for a batch.
func settleLeased(ctx context.Context, t *harness.Target, ack *sql.Stmt, got []int64, batch int, token time.Time, handle func()) (int, error) {
	tok := t.D.Time(token)
	if batch == 1 {
		for _, id := range got {
			handle()
			if err := guardedOne(ack.ExecContext(ctx, id, tok)); err != nil {
				return 0, err
			}
		}
		return len(got), nil
	}
	for range got {
		handle()
	}
	res, err := ack.ExecContext(ctx, ids(nil, got, batch, tok)...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n != int64(len(got)) {
			err = fmt.Errorf("a guarded settlement changed %d of its %d rows: leases were lost", n, len(got))
		}
	}
	if err != nil {
		return 0, err
	}
	return len(got), nil
}

// guardedOne is the form's check of a guarded settlement: it changed its row.
func guardedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		err = errors.New("a guarded settlement changed no row: the lease was lost")
	}
	return err
}

// rawLeasePicked, where the claim is a pick and a stamp (MySQL, MariaDB, SQLite): a transaction
// with the SELECT and the stamp, then the guarded DELETE. On MySQL and MariaDB the transaction
// is READ COMMITTED and the SELECT skips locked rows; on SQLite, with one writer, it begins
// IMMEDIATE (the target's _txlock) and the process runs one claim at a time (parallel claims
// only collide).
type rawLeasePicked struct {
	t                 *harness.Target
	tx                *sql.TxOptions
	serial            *sync.Mutex // one writer: held around each claim
	claim, stamp, ack *sql.Stmt
	stmts
}

func newRawLeasePicked(ctx context.Context, t *harness.Target, s *statements, batch int) (*rawLeasePicked, error) {
	l := &rawLeasePicked{t: t, tx: txOptions(s.caps)}
	if s.caps.OneWriter {
		l.serial = new(sync.Mutex)
	}
	ls := s.leaseStatements()
	var err error
	l.claim = l.prepare(ctx, t.DB, ls.Claim(batch).SQL, &err) // the pick binds its limit
	l.stamp = l.prepare(ctx, t.DB, ls.Stamp(batch).SQL, &err)
	l.ack = l.prepare(ctx, t.DB, leaseAck(ls, batch), &err)
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

func (l *rawLeasePicked) step(ctx context.Context, batch int, handle func()) (int, error) {
	now := time.Now()
	token := leaseToken(now)
	if l.serial != nil {
		l.serial.Lock()
	}
	got, err := l.claimInTx(ctx, batch, now, token)
	if l.serial != nil {
		l.serial.Unlock()
	}
	if err != nil || len(got) == 0 {
		return 0, err
	}
	return settleLeased(ctx, l.t, l.ack, got, batch, token, handle)
}

func (l *rawLeasePicked) claimInTx(ctx context.Context, batch int, now, token time.Time) ([]int64, error) {
	tx, err := l.t.DB.BeginTx(ctx, l.tx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	got, err := scanDeliveries(tx.StmtContext(ctx, l.claim).QueryContext(ctx, l.t.D.Time(now), batch))
	if err != nil || len(got) == 0 {
		return nil, err
	}
	if _, err := tx.StmtContext(ctx, l.stamp).ExecContext(ctx, ids([]any{l.t.D.Time(token)}, got, batch)...); err != nil {
		return nil, err
	}
	return got, tx.Commit()
}

// rawAdvisory: select candidates with their keys (skipping keys held elsewhere); on a pinned
// connection take the key's session lock without waiting, re-check the row and count the
// attempt, handle, DELETE, unlock, give the connection back. A batch holds its rows' locks on
// one connection (one row per key), deletes its rows in one statement and releases its keys in
// another.
type rawAdvisory struct {
	t                             *harness.Target
	a, acked                      sqltext.Advisory // acked builds the acks
	candidates                    *sql.Stmt
	lock, unlock, take, read, ack string // read is empty where take returns the row
	stmts
}

func newRawAdvisory(ctx context.Context, t *harness.Target, s *statements) (*rawAdvisory, error) {
	// The key template the harness gives the form: the table's name, a dash, the id.
	a := s.Advisory([]sqltext.KeyPart{{Text: s.table + "-"}, {Column: s.id}})
	acked := s.advisoryAcks(a)
	l := &rawAdvisory{t: t, a: a, acked: acked, lock: a.Lock().SQL, unlock: a.Unlock().SQL, take: a.Take().SQL, read: a.Read().SQL,
		ack: acked.Settle(outcome.KindAck, sqltext.ByID()).SQL}
	var err error
	l.candidates = l.prepare(ctx, t.DB, a.Candidates().SQL, &err)
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

// advisoryCandidateSlack is the form's candidateSlack: a claim selects this many candidates
// beyond the rows it asks for.
const advisoryCandidateSlack = 4

type candidateRow struct {
	id  int64
	key string
}

func (l *rawAdvisory) step(ctx context.Context, batch int, handle func()) (int, error) {
	rows, err := l.candidates.QueryContext(ctx, batch+advisoryCandidateSlack)
	if err != nil {
		return 0, err
	}
	var cands []candidateRow
	for rows.Next() {
		var c candidateRow
		if err := rows.Scan(&c.id, &c.key); err != nil {
			rows.Close()
			return 0, err
		}
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(cands) == 0 {
		return 0, err
	}
	if batch == 1 {
		for _, c := range cands {
			conn, err := l.t.DB.Conn(ctx)
			if err != nil {
				return 0, err
			}
			ok, err := l.takeOne(ctx, conn, c)
			if err != nil || !ok {
				conn.Close()
				if err != nil {
					return 0, err
				}
				continue
			}
			handle()
			if _, err := conn.ExecContext(ctx, l.ack, c.id); err != nil {
				conn.Close()
				return 0, err
			}
			err = l.release(ctx, conn, c.key)
			conn.Close()
			return 1, err
		}
		return 0, nil
	}
	conn, err := l.t.DB.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var (
		got  []any // ids
		keys []any
		seen = map[string]bool{}
	)
	for _, c := range cands {
		if len(got) == batch {
			break
		}
		if seen[c.key] {
			continue
		}
		seen[c.key] = true
		ok, err := l.takeOne(ctx, conn, c)
		if err != nil {
			return 0, err
		}
		if ok {
			got, keys = append(got, c.id), append(keys, c.key)
		}
	}
	if len(got) == 0 {
		return 0, nil
	}
	for range got {
		handle()
	}
	if _, err := conn.ExecContext(ctx, l.acked.Settle(outcome.KindAck, sqltext.ByIDs(len(got))).SQL, got...); err != nil {
		return 0, err
	}
	if len(keys) == 1 {
		return 1, l.release(ctx, conn, keys[0].(string))
	}
	var released int
	if err := conn.QueryRowContext(ctx, l.a.UnlockMany(len(keys)).SQL, keys...).Scan(&released); err != nil {
		return 0, err
	}
	if released != len(keys) {
		return 0, fmt.Errorf("the server confirmed %d of %d unlocks", released, len(keys))
	}
	return len(got), nil
}

// takeOne takes c's lock on conn and re-checks the row, counting the attempt; false when the
// key is held elsewhere or the row is gone (its lock released again).
func (l *rawAdvisory) takeOne(ctx context.Context, conn *sql.Conn, c candidateRow) (bool, error) {
	var locked sql.NullBool
	if err := conn.QueryRowContext(ctx, l.lock, c.key).Scan(&locked); err != nil {
		return false, err
	}
	if !locked.Valid || !locked.Bool {
		return false, nil
	}
	var (
		id      int64
		payload []byte
		attempt int64
		err     error
	)
	if l.read == "" { // the take returns the row
		err = conn.QueryRowContext(ctx, l.take, c.id, c.key).Scan(&id, &payload, &attempt)
	} else {
		var res sql.Result
		if res, err = conn.ExecContext(ctx, l.take, c.id, c.key); err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n == 0 {
				err = sql.ErrNoRows
			}
		}
		if err == nil {
			err = conn.QueryRowContext(ctx, l.read, c.id).Scan(&id, &payload, &attempt)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return false, l.release(ctx, conn, c.key)
	}
	return err == nil, err
}

func (l *rawAdvisory) release(ctx context.Context, conn *sql.Conn, key string) error {
	var ok sql.NullBool
	if err := conn.QueryRowContext(ctx, l.unlock, key).Scan(&ok); err != nil {
		return err
	}
	if !ok.Valid || !ok.Bool {
		return fmt.Errorf("the server did not confirm the unlock of key %q", key)
	}
	return nil
}
