package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// The raw loops: what a careful engineer would write by hand with database/sql, running the
// statements each form runs (their text is copied from lease/sql.go, rowlock/rowlock.go and
// advisory/statements.go for the bench table: no group, priority, retry_after or processed_at
// column, so the claim's predicate is "1 = 1" and the order is the id). Statements are prepared
// once on the pool where the form prepares them too, and rebound to a transaction with
// tx.StmtContext; the advisory loop runs its statements by text on the pinned connection, as the
// form does, since database/sql cannot rebind a prepared statement to an *sql.Conn.
//
// A batch runs what the form's ClaimBatch and SettleBatch run: one claim with LIMIT n (the
// lease form's MySQL stamp over an IN list of the ids, padded to n by repeating the last), and
// one settlement: a DELETE over an IN list of the ids (guarded by the lease token, padded as the
// stamp), except the row lock form on MySQL and MariaDB, which deletes each row on its id in the
// batch's transaction, and the advisory form, whose DELETE names exactly the rows taken and
// which then releases every key of the batch in one statement.

// rawLoop claims and settles rows of one table. step claims up to batch rows, hands each to the
// handler and settles them, and returns how many it handled.
type rawLoop interface {
	step(ctx context.Context, batch int, handle func()) (int, error)
	close()
}

// drainRaw prefills the form's table and drains it with w goroutines each running the raw loop
// until every row is handled; an empty claim while rows remain (they are in another goroutine's
// hands) waits a millisecond.
func drainRaw(ctx context.Context, t *target, form string, cfg *benchConfig, w, batch int, bar *benchBar) (rate, allocs float64, err error) {
	table := benchTable(t, form).Name
	if err := prefill(ctx, t, table, cfg.n); err != nil {
		return 0, 0, fmt.Errorf("prefilling: %w", err)
	}
	loop, err := newRawLoop(ctx, t, form, batch)
	if err != nil {
		return 0, 0, err
	}
	defer loop.close()

	want := int64(cfg.n)
	var handled, conflicts atomic.Int64
	handle := func() {} // the handler does nothing, as the library cells' handler
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mallocs := mallocsSoFar()
	start := time.Now()
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for handled.Load() < want && runCtx.Err() == nil {
				n, err := loop.step(runCtx, batch, handle)
				if err != nil && t.d.Retryable(err) {
					// A conflict rolled the step back: its rows are claimable again.
					if conflicts.Add(1) == 1 {
						bar.logf("%s %s raw batch %d: a conflict, retried: %v", t.name, form, batch, err)
					}
					continue
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				handled.Add(int64(n))
				bar.add(int64(n))
				if n == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	allocs = float64(mallocsSoFar()-mallocs) / float64(want)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if err := checkDrained(ctx, t, table, handled.Load(), want); err != nil {
		return 0, 0, err
	}
	return float64(want) / elapsed.Seconds(), allocs, nil
}

// sqlText holds a table's quoted names and writes placeholders for its dialect.
type sqlText struct {
	d                               dialect.Runtime
	table, id, payload, attempt, lu string
}

func newSQLText(t *target, form string) (*sqlText, error) {
	s := &sqlText{d: t.d}
	for _, p := range []struct {
		dst  *string
		name string
	}{{&s.table, benchTable(t, form).Name}, {&s.id, "id"}, {&s.payload, "payload"}, {&s.attempt, "attempt"}, {&s.lu, "locked_until"}} {
		q, err := t.d.Quote(p.name)
		if err != nil {
			return nil, err
		}
		*p.dst = q
	}
	return s, nil
}

// ph is the n-th placeholder.
func (s *sqlText) ph(n int) string { return s.d.Placeholder(n) }

// in is an IN list of n placeholders starting at the from-th.
func (s *sqlText) in(from, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = s.ph(from + i)
	}
	return "(" + strings.Join(p, ", ") + ")"
}

// cols is the delivery's select list: id, payload, attempt.
func (s *sqlText) cols(prefix string) string {
	return prefix + s.id + ", " + prefix + s.payload + ", " + prefix + s.attempt
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

func newRawLoop(ctx context.Context, t *target, form string, batch int) (rawLoop, error) {
	s, err := newSQLText(t, form)
	if err != nil {
		return nil, err
	}
	var l rawLoop
	switch {
	case form == "rowlock":
		l, err = newRawRowLock(ctx, t, s, batch)
	case form == "lease" && t.name == "postgres":
		l, err = newRawLeasePostgres(ctx, t, s, batch)
	case form == "lease":
		l, err = newRawLeasePicked(ctx, t, s, batch)
	default:
		l, err = newRawAdvisory(ctx, t, s, batch)
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

// txOptions is how the forms begin on each database: a plain BEGIN on Postgres, READ COMMITTED
// on MySQL and MariaDB (the default level of the MySQL and MariaDB dialects).
func txOptions(t *target) *sql.TxOptions {
	if t.name == "postgres" {
		return nil
	}
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

// rawRowLock: BEGIN; SELECT … ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED; handle; DELETE; COMMIT.
// A batch deletes its rows with one DELETE … IN on Postgres, and row by row on MySQL and
// MariaDB, as the form does (InnoDB may take an IN list through a scan that waits on the rows
// other batches hold).
type rawRowLock struct {
	t          *target
	claim, ack *sql.Stmt
	inList     bool // ack deletes a batch's rows over an IN list
	stmts
}

func newRawRowLock(ctx context.Context, t *target, s *sqlText, batch int) (*rawRowLock, error) {
	l := &rawRowLock{t: t, inList: batch > 1 && t.name == "postgres"}
	var err error
	l.claim = l.prepare(ctx, t.db, "SELECT "+s.cols("")+" FROM "+s.table+" WHERE 1 = 1 ORDER BY "+s.id+" LIMIT "+strconv.Itoa(batch)+" FOR UPDATE SKIP LOCKED", &err)
	if l.inList {
		l.ack = l.prepare(ctx, t.db, "DELETE FROM "+s.table+" WHERE "+s.id+" IN "+s.in(1, batch), &err)
	} else {
		l.ack = l.prepare(ctx, t.db, "DELETE FROM "+s.table+" WHERE "+s.id+" = "+s.ph(1), &err)
	}
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

func (l *rawRowLock) step(ctx context.Context, batch int, handle func()) (int, error) {
	tx, err := l.t.db.BeginTx(ctx, txOptions(l.t))
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

// scanDeliveries reads id, payload, attempt rows and returns the ids.
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

// rawLeasePostgres: one WITH … FOR UPDATE SKIP LOCKED … UPDATE … RETURNING claim, committed at
// once; then a DELETE guarded by the token per row (or one for the batch).
type rawLeasePostgres struct {
	t          *target
	claim, ack *sql.Stmt
	stmts
}

func newRawLeasePostgres(ctx context.Context, t *target, s *sqlText, batch int) (*rawLeasePostgres, error) {
	l := &rawLeasePostgres{t: t}
	var err error
	l.claim = l.prepare(ctx, t.db, "WITH inbox_lease_pick AS (SELECT "+s.id+" FROM "+s.table+" WHERE 1 = 1 AND ("+s.lu+" IS NULL OR "+s.lu+" < $1)"+
		" ORDER BY "+s.id+" LIMIT $2 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "+s.table+" SET "+s.lu+" = $3, "+s.attempt+" = COALESCE("+s.attempt+", 0) + 1"+
		" FROM inbox_lease_pick WHERE "+s.table+"."+s.id+" = inbox_lease_pick."+s.id+" RETURNING "+s.cols(s.table+".")+")"+
		" SELECT "+s.cols("")+" FROM inbox_lease_claimed ORDER BY "+s.id, &err)
	if batch == 1 {
		l.ack = l.prepare(ctx, t.db, "DELETE FROM "+s.table+" WHERE "+s.id+" = $1 AND "+s.lu+" = $2", &err)
	} else {
		l.ack = l.prepare(ctx, t.db, "DELETE FROM "+s.table+" WHERE "+s.id+" IN "+s.in(1, batch)+" AND "+s.lu+" = "+s.ph(batch+1), &err)
	}
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

func (l *rawLeasePostgres) step(ctx context.Context, batch int, handle func()) (int, error) {
	now := time.Now()
	token := leaseToken(now)
	got, err := scanDeliveries(l.claim.QueryContext(ctx, l.t.d.Time(now), batch, l.t.d.Time(token)))
	if err != nil || len(got) == 0 {
		return 0, err
	}
	return settleLeased(ctx, l.t, l.ack, got, batch, token, handle)
}

// settleLeased hands each leased row to the handler and deletes it, guarded by its token: one
// DELETE per row, as the form settles, or one for a batch.
func settleLeased(ctx context.Context, t *target, ack *sql.Stmt, got []int64, batch int, token time.Time, handle func()) (int, error) {
	tok := t.d.Time(token)
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

// rawLeasePicked: a transaction with the SELECT and the stamp, then the guarded DELETE. On MySQL
// and MariaDB the transaction is READ COMMITTED and the SELECT skips locked rows; on SQLite, with
// one writer, it begins IMMEDIATE (the DSN's _txlock, see sqliteSource) and the process runs one
// claim at a time (parallel claims only collide).
type rawLeasePicked struct {
	t                 *target
	txOptions         *sql.TxOptions
	serial            sync.Mutex // SQLite: held around each claim
	sqlite            bool
	claim, stamp, ack *sql.Stmt
	stmts
}

func newRawLeasePicked(ctx context.Context, t *target, s *sqlText, batch int) (*rawLeasePicked, error) {
	l := &rawLeasePicked{t: t, sqlite: t.name == "sqlite"}
	pick := "SELECT " + s.cols("") + " FROM " + s.table + " WHERE 1 = 1 AND (" + s.lu + " IS NULL OR " + s.lu + " < " + s.ph(1) + ") ORDER BY " + s.id + " LIMIT " + s.ph(2)
	if !l.sqlite {
		l.txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
		pick += " FOR UPDATE SKIP LOCKED"
	}
	var err error
	l.claim = l.prepare(ctx, t.db, pick, &err)
	l.stamp = l.prepare(ctx, t.db, "UPDATE "+s.table+" SET "+s.lu+" = "+s.ph(1)+", "+s.attempt+" = COALESCE("+s.attempt+", 0) + 1 WHERE "+s.id+" IN "+s.in(2, batch), &err)
	if batch == 1 {
		l.ack = l.prepare(ctx, t.db, "DELETE FROM "+s.table+" WHERE "+s.id+" = "+s.ph(1)+" AND "+s.lu+" = "+s.ph(2), &err)
	} else {
		l.ack = l.prepare(ctx, t.db, "DELETE FROM "+s.table+" WHERE "+s.id+" IN "+s.in(1, batch)+" AND "+s.lu+" = "+s.ph(batch+1), &err)
	}
	if err != nil {
		l.stmts.close()
	}
	return l, err
}

func (l *rawLeasePicked) step(ctx context.Context, batch int, handle func()) (int, error) {
	now := time.Now()
	token := leaseToken(now)
	if l.sqlite {
		l.serial.Lock()
	}
	got, err := l.claimInTx(ctx, batch, now, token)
	if l.sqlite {
		l.serial.Unlock()
	}
	if err != nil || len(got) == 0 {
		return 0, err
	}
	return settleLeased(ctx, l.t, l.ack, got, batch, token, handle)
}

func (l *rawLeasePicked) claimInTx(ctx context.Context, batch int, now, token time.Time) ([]int64, error) {
	tx, err := l.t.db.BeginTx(ctx, l.txOptions)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	got, err := scanDeliveries(tx.StmtContext(ctx, l.claim).QueryContext(ctx, l.t.d.Time(now), batch))
	if err != nil || len(got) == 0 {
		return nil, err
	}
	if _, err := tx.StmtContext(ctx, l.stamp).ExecContext(ctx, ids([]any{l.t.d.Time(token)}, got, batch)...); err != nil {
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
	t                             *target
	s                             *sqlText
	candidates                    *sql.Stmt
	lock, unlock, take, read, ack string
	postgres                      bool
	stmts
}

func newRawAdvisory(ctx context.Context, t *target, s *sqlText, batch int) (*rawAdvisory, error) {
	l := &rawAdvisory{t: t, s: s, postgres: t.name == "postgres"}
	raw := strings.Trim(s.table, "`\"")
	var err error
	if l.postgres {
		key := "'" + raw + "-' || COALESCE(CAST(" + s.id + " AS TEXT), '')"
		l.candidates = l.prepare(ctx, t.db, "SELECT c."+s.id+", c.inbox_key FROM (SELECT "+s.id+", "+key+" AS inbox_key FROM "+s.table+
			" WHERE 1 = 1 ORDER BY "+s.id+" OFFSET 0) c WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT $1", &err)
		l.lock = "SELECT pg_try_advisory_lock(hashtextextended($1, 0))"
		l.unlock = "SELECT pg_advisory_unlock(hashtextextended($1, 0))"
		l.take = "UPDATE " + s.table + " SET " + s.attempt + " = COALESCE(" + s.attempt + ", 0) + 1 WHERE " + s.id + " = $1 AND (" + key + ") = $2 RETURNING " + s.cols("")
	} else {
		key := "CONCAT('" + raw + "-', COALESCE(CAST(" + s.id + " AS CHAR), ''))"
		l.candidates = l.prepare(ctx, t.db, "SELECT "+s.id+", "+key+" FROM "+s.table+
			" WHERE IS_USED_LOCK("+mysqlLockName("CONCAT(DATABASE(), '.', "+key+")")+") IS NULL ORDER BY "+s.id+" LIMIT ?", &err)
		const named = " FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k"
		l.lock = "SELECT GET_LOCK(" + mysqlLockName("n") + ", 0)" + named
		l.unlock = "SELECT RELEASE_LOCK(" + mysqlLockName("n") + ")" + named
		l.take = "UPDATE " + s.table + " SET " + s.attempt + " = COALESCE(" + s.attempt + ", 0) + 1 WHERE " + s.id + " = ? AND (" + key + ") = ?"
		l.read = "SELECT " + s.cols("") + " FROM " + s.table + " WHERE " + s.id + " = ?"
	}
	l.ack = "DELETE FROM " + s.table + " WHERE " + s.id + " = " + s.ph(1)
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
			conn, err := l.t.db.Conn(ctx)
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
	conn, err := l.t.db.Conn(ctx)
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
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+l.s.table+" WHERE "+l.s.id+" IN "+l.s.in(1, len(got)), got...); err != nil {
		return 0, err
	}
	if len(keys) == 1 {
		return 1, l.release(ctx, conn, keys[0].(string))
	}
	var released int
	if err := conn.QueryRowContext(ctx, l.unlockMany(len(keys)), keys...).Scan(&released); err != nil {
		return 0, err
	}
	if released != len(keys) {
		return 0, fmt.Errorf("the server confirmed %d of %d unlocks", released, len(keys))
	}
	return len(got), nil
}

// unlockMany is the form's release of n keys in one statement, answering how many releases the
// server confirmed.
func (l *rawAdvisory) unlockMany(n int) string {
	rows := make([]string, n)
	if l.postgres {
		for i := range rows {
			rows[i] = "(CAST(" + l.s.ph(i+1) + " AS TEXT))"
		}
		return "SELECT COUNT(*) FROM (VALUES " + strings.Join(rows, ", ") + ") AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))"
	}
	for i := range rows {
		rows[i] = "SELECT CONCAT(DATABASE(), '.', ?) AS n"
	}
	return "SELECT COUNT(*) FROM (" + strings.Join(rows, " UNION ALL ") + ") AS k WHERE RELEASE_LOCK(" + mysqlLockName("n") + ") = 1"
}

// mysqlLockName is the form's GET_LOCK name for scoped: itself, or its SHA-1 when longer than
// MySQL's 64 characters.
func mysqlLockName(scoped string) string {
	return "IF(CHAR_LENGTH(" + scoped + ") > 64, SHA1(" + scoped + "), " + scoped + ")"
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
	var err error
	if l.postgres {
		var (
			id      int64
			payload []byte
			attempt int64
		)
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
			var (
				id      int64
				payload []byte
				attempt int64
			)
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
