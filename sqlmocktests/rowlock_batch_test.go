package sqlmocktests

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// rowlockBatchStatements are the statements of a batch of up to 8 rows on the full table: the
// claim, and on Postgres the settlement statements over id IN lists as long as the batches the
// tests settle (2 and 7 rows), the ids padded to that length. MySQL and MariaDB settle each row
// with the single delivery's statement.
type rowlockBatchStatements struct {
	claim          string
	ack2, ack7     string
	retry2, retry7 string
	retryAfter7    string
}

var (
	rowlockBatchPostgres = rowlockBatchStatements{
		claim:       `SELECT "id", "payload", "attempt", "grp", "headers" FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "grp" = $2 ORDER BY "priority", "retry_after" NULLS FIRST, "id" LIMIT 8 FOR UPDATE SKIP LOCKED`,
		ack2:        `UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3)`,
		ack7:        `UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4, $5, $6, $7, $8)`,
		retry2:      `UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" IN ($1, $2)`,
		retry7:      `UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" IN ($1, $2, $3, $4, $5, $6, $7)`,
		retryAfter7: `UPDATE "jobs" SET "retry_after" = $1, "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" IN ($2, $3, $4, $5, $6, $7, $8)`,
	}
	rowlockBatchMySQL = rowlockBatchStatements{
		claim: "SELECT `id`, `payload`, `attempt`, `grp`, `headers` FROM `jobs` WHERE `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `grp` = ? ORDER BY `priority`, `retry_after`, `id` LIMIT 8 FOR UPDATE SKIP LOCKED",
	}
)

// rowlockBatchDialects are the dialects the batch statements are pinned on: Postgres, and MySQL
// (MariaDB runs the same text).
var rowlockBatchDialects = []rowlockDialect{rowlockPostgres, rowlockMySQL}

func rowlockBatchSQL(dc rowlockDialect) rowlockBatchStatements {
	if strings.HasPrefix(dc.name, "postgres") {
		return rowlockBatchPostgres
	}
	return rowlockBatchMySQL
}

// rowlockBatchGroup is the settlement of a batch's rows of one kind of outcome (or of one
// delay): on Postgres one prepared statement, in, over the rows' ids padded to the batch's
// size; on MySQL the single row's statement, one, per row. Either binds lead before the ids.
type rowlockBatchGroup struct {
	in, one string
	lead    []driver.Value
	ids     []int64
}

// rowlockExpectBatchPrepares expects, on Postgres, the first preparation of the settlement
// statements of groups, each once (a kind's statement serves every delay), before any runs:
// database/sql prepares them on a free connection, since the batch's is busy. Each is closed
// at Close.
func rowlockExpectBatchPrepares(m *recorder, dc rowlockDialect, groups []rowlockBatchGroup) {
	if !strings.HasPrefix(dc.name, "postgres") {
		return
	}
	var seen []string
	for _, g := range groups {
		if !slices.Contains(seen, g.in) {
			seen = append(seen, g.in)
			m.mock.ExpectPrepare(g.in).WillBeClosed()
		}
	}
}

// rowlockExpectBatchGroups expects the settlement statements of groups for a batch of n rows.
// With prepared, the batch is the first to run them: on Postgres database/sql prepares each
// again on the batch's connection before it first runs there (and closes that at Close too);
// without, a batch of the same size ran them before on this connection, so nothing prepares.
func rowlockExpectBatchGroups(m *recorder, dc rowlockDialect, groups []rowlockBatchGroup, n int, prepared bool) {
	var seen []string
	for _, g := range groups {
		if strings.HasPrefix(dc.name, "postgres") {
			if prepared && !slices.Contains(seen, g.in) {
				seen = append(seen, g.in)
				m.mock.ExpectPrepare(g.in).WillBeClosed()
			}
			m.mock.ExpectExec(g.in).WithArgs(rowlockPadded(g.lead, g.ids, n)...).WillReturnResult(sqlmock.NewResult(0, int64(len(g.ids))))
			continue
		}
		for _, id := range g.ids {
			m.mock.ExpectExec(g.one).WithArgs(append(slices.Clip(g.lead), id)...).WillReturnResult(sqlmock.NewResult(0, 1))
		}
	}
}

// rowlockPadded is lead, then ids padded to n by repeating the last.
func rowlockPadded(lead []driver.Value, ids []int64, n int) []driver.Value {
	args := slices.Clip(lead)
	for i := range n {
		args = append(args, ids[min(i, len(ids)-1)])
	}
	return args
}

// rowlockExpectBatchClaim expects a batch claim's transaction and select on the full table,
// answered by rows 1 to n, row i with attempt i-1.
func rowlockExpectBatchClaim(m *recorder, dc rowlockDialect, n int) {
	m.mock.ExpectBegin()
	rows := sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"})
	for i := 1; i <= n; i++ {
		rows.AddRow(int64(i), []byte("p"), int64(i-1), rowlockQueue, nil)
	}
	m.mock.ExpectQuery(rowlockBatchSQL(dc).claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).WillReturnRows(rows)
}

func rowlockClaimBatch(t *testing.T, f inbox.Form, max, want int) []*inbox.Delivery {
	t.Helper()
	ds, err := f.(inbox.BatchForm).ClaimBatch(context.Background(), max)
	if err != nil {
		t.Fatalf("ClaimBatch(%d): %v", max, err)
	}
	if len(ds) != want {
		t.Fatalf("ClaimBatch(%d) returned %d deliveries, want %d", max, len(ds), want)
	}
	return ds
}

// TestRowlockBatchSettles pins the statement sequence of two batches of the same size: the
// LIMIT 8 claim prepared once and closed at Close, one transaction at the dialect's level, the
// settlement, COMMIT. On Postgres the settlement is one prepared statement per kind of outcome
// over an id IN list padded to the batch's size (RetryAfter's run once per distinct delay),
// prepared at the first batch, reused by the second, and closed at Close; on MySQL one
// statement per row, on its id. In transactional mode the batch shares one savepoint: all Acks
// keep the handler's write; any other outcome rolls it back and settles the Acks as Retries.
func TestRowlockBatchSettles(t *testing.T) {
	ts := func(d time.Duration) driver.Value { return rowlockTimeNear{time.Now().Add(d)} }
	pg, my := rowlockBatchPostgres, rowlockMySQLFull
	mixed := []outcome.Outcome{
		outcome.Ack(), outcome.Retry(), outcome.RetryAfter(time.Hour), outcome.Drop(),
		{}, outcome.RetryAfter(time.Hour), outcome.RetryAfter(time.Minute),
	}
	allAck := make([]outcome.Outcome, 7)
	for i := range allAck {
		allAck[i] = outcome.Ack()
	}
	cases := []struct {
		name          string
		transactional bool
		outcomes      []outcome.Outcome
		rollbackTo    bool
		groups        []rowlockBatchGroup
	}{
		{"mixed", false, mixed, false, []rowlockBatchGroup{
			{pg.ack7, my.ack, []driver.Value{ts(0)}, []int64{1, 4}},
			{pg.retry7, my.retry, nil, []int64{2, 5}},
			{pg.retryAfter7, my.retryAfter, []driver.Value{ts(time.Hour)}, []int64{3, 6}},
			{pg.retryAfter7, my.retryAfter, []driver.Value{ts(time.Minute)}, []int64{7}},
		}},
		{"mixed/transactional", true, mixed, true, []rowlockBatchGroup{
			{pg.ack7, my.ack, []driver.Value{ts(0)}, []int64{4}},
			{pg.retry7, my.retry, nil, []int64{1, 2, 5}},
			{pg.retryAfter7, my.retryAfter, []driver.Value{ts(time.Hour)}, []int64{3, 6}},
			{pg.retryAfter7, my.retryAfter, []driver.Value{ts(time.Minute)}, []int64{7}},
		}},
		{"all ack/transactional", true, allAck, false, []rowlockBatchGroup{
			{pg.ack7, my.ack, []driver.Value{ts(0)}, []int64{1, 2, 3, 4, 5, 6, 7}},
		}},
	}
	for _, dc := range rowlockBatchDialects {
		for _, c := range cases {
			t.Run(dc.name+"/"+c.name, func(t *testing.T) {
				bs := rowlockBatchSQL(dc)
				m := newRecorder(t, 0)
				rowlockExpectOpen(m, dc, dc.full)
				m.mock.ExpectPrepare(bs.claim).WillBeClosed()
				for batch := range 2 {
					rowlockExpectBatchClaim(m, dc, 7)
					if c.transactional {
						m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
						m.mock.ExpectExec("INSERT INTO notes (body) VALUES ('sent')").WillReturnResult(sqlmock.NewResult(1, 1))
					}
					if batch == 0 {
						rowlockExpectBatchPrepares(m, dc, c.groups)
					}
					if c.rollbackTo {
						m.mock.ExpectExec("ROLLBACK TO SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
					}
					rowlockExpectBatchGroups(m, dc, c.groups, 7, batch == 0)
					m.mock.ExpectCommit()
				}

				f := dc.form(rowlockFullTable)
				rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: c.transactional})
				for range 2 {
					ds := rowlockClaimBatch(t, f, 8, 7)
					first, _ := inbox.HoldOf[any](ds[0])
					for i, d := range ds {
						if d.ID != int64(i+1) || d.Attempt != i+1 || d.Queue != rowlockQueue {
							t.Fatalf("delivery %d = %+v; want id %d, attempt %d (read %d, plus this delivery), group %s", i, d, i+1, i+1, i, rowlockQueue)
						}
						if h, _ := inbox.HoldOf[any](d); h != first {
							t.Fatalf("delivery %d has a hold of its own; a batch shares one", i)
						}
						if (d.Tx != nil) != c.transactional {
							t.Fatalf("delivery %d Tx = %v; want one exactly in transactional mode", i, d.Tx)
						}
					}
					if c.transactional {
						if _, err := ds[2].Tx.ExecContext(context.Background(), "INSERT INTO notes (body) VALUES ('sent')"); err != nil {
							t.Fatalf("the handler's write: %v", err)
						}
					}
					if err := f.(inbox.BatchForm).SettleBatch(context.Background(), ds, c.outcomes); err != nil {
						t.Fatalf("SettleBatch: %v", err)
					}
					if c.transactional {
						for _, d := range ds {
							if _, err := d.Tx.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, inbox.ErrTransactionHeld) {
								t.Errorf("delivery %d's Tx after the settlement: err = %v, want ErrTransactionHeld", d.ID, err)
							}
						}
					}
				}
				if err := f.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				// Every statement prepared was closed by Close, before the database closes.
				if err := m.mock.ExpectationsWereMet(); err != nil {
					t.Errorf("after Close: %v", err)
				}
				rowlockCheckLevels(t, m, dc, 2)
			})
		}
	}
}

// TestRowlockBatchMinimalTable: without the optional columns the batch's Acks and Drops are
// deleted (by one prepared DELETE … IN over the ids padded to the batch's size on Postgres, a
// DELETE per row on MySQL), and its Retries and RetryAfters leave their rows as they were
// (RetryAfter warns); a batch of nothing but retries rolls back.
func TestRowlockBatchMinimalTable(t *testing.T) {
	for _, c := range []struct {
		dc       rowlockDialect
		claim    string
		deletes  []string // the statements that delete rows 1 and 3, nil: a rollback instead
		outcomes []outcome.Outcome
	}{
		{dc: rowlockPostgres, claim: `SELECT "id", "payload" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 4 FOR UPDATE SKIP LOCKED`,
			deletes:  []string{`DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3)`},
			outcomes: []outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop()}},
		{dc: rowlockMySQL, claim: "SELECT `id`, `payload` FROM `jobs` WHERE 1 = 1 ORDER BY `id` LIMIT 4 FOR UPDATE SKIP LOCKED",
			deletes:  []string{"DELETE FROM `jobs` WHERE `id` = ?", "DELETE FROM `jobs` WHERE `id` = ?"},
			outcomes: []outcome.Outcome{outcome.Drop(), outcome.Retry(), outcome.Ack()}},
		{dc: rowlockPostgres, claim: `SELECT "id", "payload" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 4 FOR UPDATE SKIP LOCKED`,
			outcomes: []outcome.Outcome{outcome.Retry(), outcome.RetryAfter(time.Minute), {}}},
	} {
		dc := c.dc
		t.Run(dc.name+"/"+c.outcomes[0].String()+","+c.outcomes[1].String()+","+c.outcomes[2].String(), func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.minimal)
			m.mock.ExpectPrepare(c.claim).WillBeClosed()
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(c.claim).WithoutArgs().
				WillReturnRows(sqlmock.NewRows([]string{"id", "payload"}).AddRow(int64(1), []byte("a")).AddRow(int64(2), []byte("b")).AddRow(int64(3), []byte("c")))
			switch len(c.deletes) {
			case 0:
				m.mock.ExpectRollback()
			case 1:
				// Prepared on a free connection, then on the batch's; rows 1 and 3, padded to 3.
				m.mock.ExpectPrepare(c.deletes[0]).WillBeClosed()
				m.mock.ExpectPrepare(c.deletes[0]).WillBeClosed()
				m.mock.ExpectExec(c.deletes[0]).WithArgs(int64(1), int64(3), int64(3)).WillReturnResult(sqlmock.NewResult(0, 2))
				m.mock.ExpectCommit()
			default:
				m.mock.ExpectExec(c.deletes[0]).WithArgs(int64(1)).WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectExec(c.deletes[1]).WithArgs(int64(3)).WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectCommit()
			}

			var logs bytes.Buffer
			f := dc.form(rowlockMinimalTable)
			rowlockOpen(t, m, f, inbox.Queue{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ds := rowlockClaimBatch(t, f, 4, 3)
			if ds[0].Attempt != 0 || string(ds[2].Payload) != "c" {
				t.Fatalf("deliveries %+v, %+v; want attempt 0 (no column) and the rows' payloads", ds[0], ds[2])
			}
			if err := f.(inbox.BatchForm).SettleBatch(context.Background(), ds, c.outcomes); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			retryAfter := false
			for _, o := range c.outcomes {
				retryAfter = retryAfter || o.Kind() == outcome.KindRetryAfter
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "table=jobs")
			if warned != retryAfter {
				t.Errorf("warning naming the table logged: %v, want %v; log:\n%s", warned, retryAfter, logs.String())
			}
		})
	}
}

// TestRowlockBatchClaim: the LIMIT n claim is prepared at the first ClaimBatch of size n and
// kept for the next; a transient conflict is rolled back and run again inside ClaimBatch; a
// claim that finds nothing rolls back and returns none; a batch of one runs the single claim's
// statement; ReleaseBatch rolls the batch back.
func TestRowlockBatchClaim(t *testing.T) {
	for _, c := range []struct {
		dc       rowlockDialect
		conflict error
	}{
		{rowlockPostgresRepeatableRead, rowlockSQLState{"40001"}},
		{rowlockMySQL, errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")},
	} {
		t.Run(c.dc.name, func(t *testing.T) {
			bs := rowlockBatchSQL(c.dc)
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, c.dc, c.dc.full)
			m.mock.ExpectPrepare(bs.claim).WillBeClosed()
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(bs.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).WillReturnError(c.conflict)
			m.mock.ExpectRollback()
			rowlockExpectBatchClaim(m, c.dc, 3)
			m.mock.ExpectRollback() // ReleaseBatch
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(bs.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
				WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}))
			m.mock.ExpectRollback()
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(c.dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
				WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}))
			m.mock.ExpectRollback()

			f := c.dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			bf := f.(inbox.BatchForm)
			ds := rowlockClaimBatch(t, f, 8, 3)
			if err := bf.ReleaseBatch(context.Background(), ds); err != nil {
				t.Fatalf("ReleaseBatch: %v", err)
			}
			if err := bf.SettleBatch(context.Background(), ds, make([]outcome.Outcome, 3)); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("SettleBatch after ReleaseBatch: err = %v, want ErrClosed", err)
			}
			rowlockClaimBatch(t, f, 8, 0)
			rowlockClaimBatch(t, f, 1, 0)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			rowlockCheckLevels(t, m, c.dc, 4)
		})
	}
}

// TestRowlockBatchMisuse: a delivery of a batch cannot be settled or released alone, a batch
// cannot be settled in part or with too few outcomes, and a single delivery cannot be settled
// as a batch; each refusal names the table and leaves the hold as it was, so the batch still
// settles whole afterwards.
func TestRowlockBatchMisuse(t *testing.T) {
	dc := rowlockPostgres
	bs := rowlockBatchSQL(dc)
	m := newRecorder(t, 0)
	rowlockExpectOpen(m, dc, dc.full)
	m.mock.ExpectPrepare(bs.claim).WillBeClosed()
	rowlockExpectBatchClaim(m, dc, 2)
	acks := []rowlockBatchGroup{{in: bs.ack2, lead: []driver.Value{rowlockTimeNear{time.Now()}}, ids: []int64{2, 1}}}
	rowlockExpectBatchPrepares(m, dc, acks)
	rowlockExpectBatchGroups(m, dc, acks, 2, true)
	m.mock.ExpectCommit()

	f := dc.form(rowlockFullTable)
	rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
	bf := f.(inbox.BatchForm)
	ds := rowlockClaimBatch(t, f, 8, 2)
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, inbox.ErrClosed) || !strings.Contains(err.Error(), `"jobs"`) {
			t.Errorf("%s: err = %v; want a refusal naming the table (not ErrClosed: the batch is still held)", what, err)
		}
	}
	err := f.Settle(context.Background(), ds[0], outcome.Ack())
	refused("Settle of a batch's delivery", err)
	if err != nil && !strings.Contains(err.Error(), "SettleBatch") {
		t.Errorf("Settle of a batch's delivery: %v; want it to point to SettleBatch", err)
	}
	refused("Release of a batch's delivery", f.Release(context.Background(), ds[1]))
	refused("SettleBatch of part of the batch", bf.SettleBatch(context.Background(), ds[:1], []outcome.Outcome{outcome.Ack()}))
	refused("SettleBatch of one delivery twice", bf.SettleBatch(context.Background(), []*inbox.Delivery{ds[0], ds[0]}, []outcome.Outcome{outcome.Ack(), outcome.Ack()}))
	refused("SettleBatch with one outcome for two rows", bf.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack()}))
	refused("ReleaseBatch of part of the batch", bf.ReleaseBatch(context.Background(), ds[1:]))
	// In another order, the whole batch settles.
	if err := bf.SettleBatch(context.Background(), []*inbox.Delivery{ds[1], ds[0]}, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); err != nil {
		t.Fatalf("SettleBatch of the whole batch after the refusals: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("single delivery as a batch", func(t *testing.T) {
		m := newRecorder(t, 0)
		rowlockExpectOpen(m, dc, dc.full)
		rowlockExpectClaimFull(m, dc, 9)
		m.mock.ExpectRollback()
		f := dc.form(rowlockFullTable)
		rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
		d := rowlockClaimOne(t, f)
		refused("SettleBatch of a single delivery", f.(inbox.BatchForm).SettleBatch(context.Background(), []*inbox.Delivery{d}, []outcome.Outcome{outcome.Ack()}))
		refused("ReleaseBatch of a single delivery", f.(inbox.BatchForm).ReleaseBatch(context.Background(), []*inbox.Delivery{d}))
		if err := f.Release(context.Background(), d); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRowlockBatchTransactionHeld: a statement of the handler's still running on the batch's
// transaction when SettleBatch is called makes the settlement fail with ErrTransactionHeld at
// once; the transaction is rolled back after that statement ends, and no settlement statement
// runs.
func TestRowlockBatchTransactionHeld(t *testing.T) {
	for _, dc := range rowlockBatchDialects {
		t.Run(dc.name, func(t *testing.T) {
			bs := rowlockBatchSQL(dc)
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.full)
			m.mock.ExpectPrepare(bs.claim).WillBeClosed()
			rowlockExpectBatchClaim(m, dc, 3)
			m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
			m.mock.ExpectExec("UPDATE accounts SET balance = 0").WillDelayFor(300 * time.Millisecond).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectRollback()

			f := dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: true})
			ds := rowlockClaimBatch(t, f, 8, 3)
			started := m.whenExec("UPDATE accounts SET balance = 0")
			leftBehind := make(chan error, 1)
			go func() {
				_, err := ds[1].Tx.ExecContext(context.Background(), "UPDATE accounts SET balance = 0")
				leftBehind <- err
			}()
			<-started
			rolledBack := m.whenRollbacks(1)
			err := f.(inbox.BatchForm).SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()})
			if !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Fatalf("SettleBatch = %v; want ErrTransactionHeld", err)
			}
			select {
			case <-leftBehind:
				t.Error("SettleBatch returned only after the handler's statement")
			default:
			}
			if err := <-leftBehind; err != nil {
				t.Fatalf("the handler's statement: %v", err)
			}
			<-rolledBack
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowlockBatchFailures: a settlement statement that fails rolls the batch's transaction
// back and is returned; a COMMIT that fails is returned, naming the table. Either way nothing
// is left held.
func TestRowlockBatchFailures(t *testing.T) {
	for _, dc := range rowlockBatchDialects {
		for _, commit := range []bool{false, true} {
			name := dc.name + "/statement"
			if commit {
				name = dc.name + "/commit"
			}
			t.Run(name, func(t *testing.T) {
				bs := rowlockBatchSQL(dc)
				m := newRecorder(t, 0)
				rowlockExpectOpen(m, dc, dc.full)
				m.mock.ExpectPrepare(bs.claim).WillBeClosed()
				rowlockExpectBatchClaim(m, dc, 2)
				broken := errors.New("connection reset by peer")
				// The first statement of the settlement: on Postgres the retry of both rows,
				// prepared first, on MySQL the retry of row 1, then of row 2.
				first, firstArgs := bs.retry2, []driver.Value{int64(1), int64(2)}
				if dc.name == "mysql" {
					first, firstArgs = dc.full.retry, []driver.Value{int64(1)}
				} else {
					m.mock.ExpectPrepare(first).WillBeClosed()
					m.mock.ExpectPrepare(first).WillBeClosed()
				}
				if commit {
					m.mock.ExpectExec(first).WithArgs(firstArgs...).WillReturnResult(sqlmock.NewResult(0, 2))
					if dc.name == "mysql" {
						m.mock.ExpectExec(dc.full.retry).WithArgs(int64(2)).WillReturnResult(sqlmock.NewResult(0, 1))
					}
					m.mock.ExpectCommit().WillReturnError(broken)
					m.mock.ExpectClose() // its outcome unknown, the connection is discarded
				} else {
					m.mock.ExpectExec(first).WithArgs(firstArgs...).WillReturnError(broken)
					m.mock.ExpectRollback()
				}

				f := dc.form(rowlockFullTable)
				rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
				bf := f.(inbox.BatchForm)
				ds := rowlockClaimBatch(t, f, 8, 2)
				err := bf.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Retry(), outcome.Retry()})
				if !errors.Is(err, broken) || !strings.Contains(err.Error(), `"jobs"`) {
					t.Fatalf("SettleBatch = %v; want the failure, naming the table", err)
				}
				if errors.Is(err, inbox.ErrCommitUnknown) != commit {
					t.Errorf("SettleBatch = %v; want ErrCommitUnknown only where the COMMIT failed", err)
				}
				if err := bf.ReleaseBatch(context.Background(), ds); !errors.Is(err, inbox.ErrClosed) {
					t.Errorf("ReleaseBatch after the failed settlement: %v, want ErrClosed", err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestRowlockBatchCloseRollsBack: Close rolls back a batch still held and frees the batch
// claim statement; the batch then no longer settles.
func TestRowlockBatchCloseRollsBack(t *testing.T) {
	dc := rowlockMariaDB
	bs := rowlockBatchSQL(rowlockMySQL)
	m := newRecorder(t, 0)
	rowlockExpectOpen(m, dc, dc.full)
	m.mock.ExpectPrepare(bs.claim).WillBeClosed()
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(bs.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
		WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}).AddRow(int64(1), nil, int64(0), rowlockQueue, nil).AddRow(int64(2), nil, int64(0), rowlockQueue, nil))
	m.mock.ExpectRollback()

	f := dc.form(rowlockFullTable)
	rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
	ds := rowlockClaimBatch(t, f, 8, 2)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.(inbox.BatchForm).SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("SettleBatch after Close: %v, want ErrClosed", err)
	}
	if _, err := f.(inbox.BatchForm).ClaimBatch(context.Background(), 8); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("ClaimBatch after Close: %v, want ErrClosed", err)
	}
	rowlockCheckLevels(t, m, dc, 1)
}
