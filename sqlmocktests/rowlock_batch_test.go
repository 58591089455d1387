package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The batches here are of three rows: the golden files' batch statements are of three.

// rowlockBatchCases are the dialects the batch statements are pinned on: Postgres, which settles
// by id lists, and MySQL, which settles row by row (MariaDB runs the same text).
var rowlockBatchCases = []dbCase{onPostgres, onMySQL}

// rowlockBatchRows are rows 1 to n, row i at attempt i-1, with a payload.
func rowlockBatchRows(n int) []row {
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{id: int64(i + 1), attempt: int64(i), payload: []byte("p")}
	}
	return rows
}

// rowlockBatchGroup is the settlement of a batch's rows of one kind of outcome (or of one
// delay), the golden files' name of its single row's statement: where the dialect settles by id
// lists one prepared statement over the rows' ids padded to the batch's size (kind+"In(3)"),
// elsewhere the single row's statement per row. Either binds lead before the ids.
type rowlockBatchGroup struct {
	kind string
	lead []driver.Value
	ids  []int64
}

// inLists reports whether the case's dialect settles a batch by id lists.
func (fx *fixture) inLists() bool { return fx.c.d.Caps().IDListSettles }

// expectRowlockSettlePrepares expects, where the dialect settles by id lists, the first
// ClaimBatch of size 3 to prepare the settlements most batches run before its transaction
// begins, on a connection of the pool: the ack (the unflushed ack too, where the form's acks
// are unflushed), and the retry where the table counts attempts. Each is closed at Close.
func (fx *fixture) expectRowlockSettlePrepares() {
	if !fx.inLists() {
		return
	}
	fx.mock.ExpectPrepare(fx.sql("ackIn(3)")).WillBeClosed()
	if fx.q.UnflushedAcks && !fx.q.Transactional && fx.c.d.Caps().UnflushedCommit != "" {
		fx.mock.ExpectPrepare(fx.sql("ackIn(3) unflushed")).WillBeClosed()
	}
	if fx.sh.table.Attempt != "" {
		fx.mock.ExpectPrepare(fx.sql("retryIn(3)")).WillBeClosed()
	}
}

// expectRowlockBatchGroups expects the settlement statements of groups for a batch of three
// rows: where the dialect settles by id lists, one statement per group over its ids padded to
// the batch's size (the ack and the retry prepared at the claim, on the connection the batch's
// transaction then takes, so not prepared again; a stamp by its text, never prepared inside the
// transaction); elsewhere the single row's statement per row.
func (fx *fixture) expectRowlockBatchGroups(groups []rowlockBatchGroup) {
	for _, g := range groups {
		if !fx.inLists() {
			for _, id := range g.ids {
				fx.mock.ExpectExec(fx.sql(g.kind)).WithArgs(append(slices.Clip(g.lead), id)...).WillReturnResult(changed(1))
			}
			continue
		}
		fx.mock.ExpectExec(fx.sql(g.kind + "In(3)")).WithArgs(padded(g.lead, g.ids, 3)...).WillReturnResult(changed(int64(len(g.ids))))
	}
}

// padded is lead, then ids padded to n by repeating the last.
func padded(lead []driver.Value, ids []int64, n int) []driver.Value {
	args := slices.Clip(lead)
	for i := range n {
		args = append(args, ids[min(i, len(ids)-1)])
	}
	return args
}

// TestRowlockBatchSettles pins the statement sequence of two batches of the same size: the
// LIMIT 3 claim prepared once and closed at Close, one transaction at the dialect's level, the
// settlement, COMMIT. On Postgres the settlement is one prepared statement per kind of outcome
// over an id IN list padded to the batch's size (RetryAfter's run once per distinct delay),
// prepared at the first batch, reused by the second, and closed at Close; on MySQL one
// statement per row, on its id. In transactional mode the batch shares one savepoint: all Acks
// keep the handler's write; any other outcome rolls it back and settles the Acks as Retries.
func TestRowlockBatchSettles(t *testing.T) {
	now := func(c dbCase) []driver.Value { return []driver.Value{c.near(time.Now())} }
	after := func(c dbCase, d time.Duration) []driver.Value { return []driver.Value{c.near(time.Now().Add(d)), nil} }
	cases := []struct {
		name          string
		transactional bool
		outcomes      []outcome.Outcome
		rollbackTo    bool
		groups        func(dbCase) []rowlockBatchGroup
	}{
		{"ack, retry, drop", false, []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Drop()}, false,
			func(c dbCase) []rowlockBatchGroup {
				return []rowlockBatchGroup{{"ack", now(c), []int64{1, 3}}, {"retry", nil, []int64{2}}}
			}},
		{"retries after two delays", false, []outcome.Outcome{outcome.RetryAfter(time.Hour), {}, outcome.RetryAfter(time.Minute)}, false,
			func(c dbCase) []rowlockBatchGroup {
				return []rowlockBatchGroup{{"retry", nil, []int64{2}}, {"retryAfter", after(c, time.Hour), []int64{1}}, {"retryAfter", after(c, time.Minute), []int64{3}}}
			}},
		{"mixed/transactional", true, []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.RetryAfter(time.Hour)}, true,
			func(c dbCase) []rowlockBatchGroup {
				return []rowlockBatchGroup{{"ack", now(c), []int64{2}}, {"retry", nil, []int64{1}}, {"retryAfter", after(c, time.Hour), []int64{3}}}
			}},
		{"all ack/transactional", true, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()}, false,
			func(c dbCase) []rowlockBatchGroup {
				return []rowlockBatchGroup{{"ack", now(c), []int64{1, 2, 3}}}
			}},
	}
	for _, c := range rowlockBatchCases {
		for _, tc := range cases {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: tc.transactional})
				groups := tc.groups(c)
				fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
				fx.expectRowlockSettlePrepares()
				for range 2 {
					fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
					if tc.transactional {
						fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
						fx.mock.ExpectExec("INSERT INTO notes (body) VALUES ('sent')").WillReturnResult(changed(1))
					}
					if tc.rollbackTo {
						fx.mock.ExpectExec(fx.sql("rollbackToSavepoint")).WillReturnResult(changed(0))
					}
					fx.expectRowlockBatchGroups(groups)
					fx.mock.ExpectCommit()
				}

				for range 2 {
					ds := claimBatch(t, f, 3, 3)
					first, _ := inbox.HoldOf[any](ds[0])
					for i, d := range ds {
						if d.ID != int64(i+1) || d.Attempt != i+1 || d.Queue != rowlockQueue {
							t.Fatalf("delivery %d = %+v; want id %d, attempt %d (read %d, plus this delivery), queue %s", i, d, i+1, i+1, i, rowlockQueue)
						}
						if h, _ := inbox.HoldOf[any](d); h != first {
							t.Fatalf("delivery %d has a hold of its own; a batch shares one", i)
						}
						if (d.Tx != nil) != tc.transactional {
							t.Fatalf("delivery %d Tx = %v; want one exactly in transactional mode", i, d.Tx)
						}
					}
					if tc.transactional {
						if _, err := ds[2].Tx.ExecContext(context.Background(), "INSERT INTO notes (body) VALUES ('sent')"); err != nil {
							t.Fatalf("the handler's write: %v", err)
						}
					}
					settleBatch(t, f, ds, tc.outcomes...)
					if tc.transactional {
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
				if err := fx.mock.ExpectationsWereMet(); err != nil {
					t.Errorf("after Close: %v", err)
				}
				fx.checkLevels(t, 2)
			})
		}
	}
}

// TestRowlockBatchMinimalTable: without the optional columns the batch's Acks and Drops are
// deleted (by one prepared DELETE … IN over the ids padded to the batch's size on Postgres, a
// DELETE per row on MySQL), and its Retries and RetryAfters leave their rows as they were
// (RetryAfter warns); a batch of nothing but retries rolls back.
func TestRowlockBatchMinimalTable(t *testing.T) {
	for _, tc := range []struct {
		c        dbCase
		outcomes []outcome.Outcome
		deletes  bool // rows 1 and 3; otherwise a rollback
	}{
		{onPostgres, []outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop()}, true},
		{onMySQL, []outcome.Outcome{outcome.Drop(), outcome.Retry(), outcome.Ack()}, true},
		{onPostgres, []outcome.Outcome{outcome.Retry(), outcome.RetryAfter(time.Minute), {}}, false},
	} {
		t.Run(tc.c.name+"/"+tc.outcomes[0].String()+","+tc.outcomes[1].String()+","+tc.outcomes[2].String(), func(t *testing.T) {
			fx, f := openRowlock(t, tc.c, minimalShape, 0, inbox.Binding{})
			fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
			fx.expectRowlockSettlePrepares()
			fx.expectRowlockClaim("claim(3)", row{id: 1, payload: []byte("a")}, row{id: 2, payload: []byte("b")}, row{id: 3, payload: []byte("c")})
			if tc.deletes {
				deletes := []rowlockBatchGroup{{"ack", nil, []int64{1, 3}}}
				fx.expectRowlockBatchGroups(deletes)
				fx.mock.ExpectCommit()
			} else {
				fx.mock.ExpectRollback()
			}

			ds := claimBatch(t, f, 3, 3)
			if ds[0].Attempt != 0 || string(ds[2].Payload) != "c" {
				t.Fatalf("deliveries %+v, %+v; want attempt 0 (no column) and the rows' payloads", ds[0], ds[2])
			}
			settleBatch(t, f, ds, tc.outcomes...)
			fx.closed(t, f)
			retryAfter := slices.ContainsFunc(tc.outcomes, func(o outcome.Outcome) bool { return o.Kind() == outcome.KindRetryAfter })
			if warned := fx.warned("table=jobs"); warned != retryAfter {
				t.Errorf("warning naming the table logged: %v, want %v; log:\n%s", warned, retryAfter, fx.logs.String())
			}
		})
	}
}

// TestRowlockBatchClaim: the LIMIT n claim is prepared at the first ClaimBatch of size n and
// kept for the next; a transient conflict is rolled back and run again inside ClaimBatch; a
// claim that finds nothing rolls back and returns none; a batch of one runs the single claim's
// statement; ReleaseBatch rolls the batch back.
func TestRowlockBatchClaim(t *testing.T) {
	for _, tc := range rowlockConflicts {
		t.Run(tc.c.name, func(t *testing.T) {
			fx, f := openRowlock(t, tc.c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
			fx.expectRowlockSettlePrepares()
			fx.mock.ExpectBegin()
			fx.expectQuery(fx.sql("claim(3)"), fx.rowlockClaimArgs()...).WillReturnError(tc.conflict)
			fx.mock.ExpectRollback()
			fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
			fx.mock.ExpectRollback() // ReleaseBatch
			fx.expectRowlockClaim("claim(3)")
			fx.mock.ExpectRollback()
			fx.expectRowlockClaim("claim")
			fx.mock.ExpectRollback()

			ds := claimBatch(t, f, 3, 3)
			if err := f.ReleaseBatch(context.Background(), ds); err != nil {
				t.Fatalf("ReleaseBatch: %v", err)
			}
			if err := f.SettleBatch(context.Background(), ds, make([]outcome.Outcome, 3)); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("SettleBatch after ReleaseBatch: err = %v, want ErrClosed", err)
			}
			claimBatch(t, f, 3, 0)
			claimBatch(t, f, 1, 0)
			fx.closed(t, f)
			fx.checkLevels(t, 4)
		})
	}
}

// TestRowlockBatchMisuse: a delivery of a batch cannot be settled or released alone, a batch
// cannot be settled in part or with too few outcomes, and a single delivery cannot be settled
// as a batch; each refusal names the table and leaves the hold as it was, so the batch still
// settles whole afterwards.
func TestRowlockBatchMisuse(t *testing.T) {
	refused := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, inbox.ErrClosed) || !strings.Contains(err.Error(), `"jobs"`) {
			t.Errorf("%s: err = %v; want a refusal naming the table (not ErrClosed: the batch is still held)", what, err)
		}
	}
	ack := outcome.Ack()

	fx, f := openRowlock(t, onPostgres, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
	fx.expectRowlockSettlePrepares()
	fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
	acks := []rowlockBatchGroup{{"ack", []driver.Value{onPostgres.near(time.Now())}, []int64{3, 2, 1}}}
	fx.expectRowlockBatchGroups(acks)
	fx.mock.ExpectCommit()

	ds := claimBatch(t, f, 3, 3)
	err := f.Settle(context.Background(), ds[0], ack)
	refused(t, "Settle of a batch's delivery", err)
	if err != nil && !strings.Contains(err.Error(), "SettleBatch") {
		t.Errorf("Settle of a batch's delivery: %v; want it to point to SettleBatch", err)
	}
	refused(t, "Release of a batch's delivery", f.Release(context.Background(), ds[1]))
	refused(t, "SettleBatch of part of the batch", f.SettleBatch(context.Background(), ds[:1], []outcome.Outcome{ack}))
	refused(t, "SettleBatch of one delivery twice", f.SettleBatch(context.Background(), []*inbox.Delivery{ds[0], ds[0], ds[1]}, []outcome.Outcome{ack, ack, ack}))
	refused(t, "SettleBatch with one outcome for three rows", f.SettleBatch(context.Background(), ds, []outcome.Outcome{ack}))
	refused(t, "ReleaseBatch of part of the batch", f.ReleaseBatch(context.Background(), ds[1:]))
	// In another order, the whole batch settles.
	if err := f.SettleBatch(context.Background(), []*inbox.Delivery{ds[2], ds[1], ds[0]}, []outcome.Outcome{ack, ack, ack}); err != nil {
		t.Fatalf("SettleBatch of the whole batch after the refusals: %v", err)
	}
	fx.closed(t, f)

	t.Run("single delivery as a batch", func(t *testing.T) {
		fx, f := openRowlock(t, onPostgres, fullShape, 0, inbox.Binding{Name: rowlockQueue})
		fx.expectRowlockClaim("claim", rowlockRow(9))
		fx.mock.ExpectRollback()
		d := rowlockClaimOne(t, f)
		refused(t, "SettleBatch of a single delivery", f.SettleBatch(context.Background(), []*inbox.Delivery{d}, []outcome.Outcome{ack}))
		refused(t, "ReleaseBatch of a single delivery", f.ReleaseBatch(context.Background(), []*inbox.Delivery{d}))
		if err := f.Release(context.Background(), d); err != nil {
			t.Fatalf("Release: %v", err)
		}
		fx.closed(t, f)
	})
}

// TestRowlockBatchTransactionHeld: a statement of the handler's still running on the batch's
// transaction when SettleBatch is called makes the settlement fail with ErrTransactionHeld at
// once; the transaction is rolled back after that statement ends, and no settlement statement
// runs.
func TestRowlockBatchTransactionHeld(t *testing.T) {
	for _, c := range rowlockBatchCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: true})
			fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
			fx.expectRowlockSettlePrepares()
			fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
			fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
			ds := claimBatch(t, f, 3, 3)
			fx.checkSettleWhileHeld(t, ds[1].Tx, func() error {
				return f.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()})
			})
			// Not fx.closed: the transaction rolled back in the background returns its
			// connection, closing its statements, a moment later; the recorder reads the
			// expectations when the test ends.
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
	for _, c := range rowlockBatchCases {
		for _, commit := range []bool{false, true} {
			name := c.name + "/statement"
			if commit {
				name = c.name + "/commit"
			}
			t.Run(name, func(t *testing.T) {
				fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
				fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
				fx.expectRowlockSettlePrepares()
				fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
				broken := errors.New("connection reset by peer")
				// The first statement of the settlement: on Postgres the retry of every row,
				// prepared at the claim, on MySQL the retry of row 1, then of rows 2 and 3.
				first, firstArgs := fx.sql("retry"), []driver.Value{int64(1)}
				if fx.inLists() {
					first, firstArgs = fx.sql("retryIn(3)"), []driver.Value{int64(1), int64(2), int64(3)}
				}
				if commit {
					fx.mock.ExpectExec(first).WithArgs(firstArgs...).WillReturnResult(changed(3))
					if !fx.inLists() {
						for _, id := range []int64{2, 3} {
							fx.mock.ExpectExec(fx.sql("retry")).WithArgs(id).WillReturnResult(changed(1))
						}
					}
					fx.mock.ExpectCommit().WillReturnError(broken)
					fx.mock.ExpectClose() // its outcome unknown, the connection is discarded
				} else {
					fx.mock.ExpectExec(first).WithArgs(firstArgs...).WillReturnError(broken)
					fx.mock.ExpectRollback()
				}

				ds := claimBatch(t, f, 3, 3)
				err := f.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Retry(), outcome.Retry(), outcome.Retry()})
				if !errors.Is(err, broken) || !strings.Contains(err.Error(), `"jobs"`) {
					t.Fatalf("SettleBatch = %v; want the failure, naming the table", err)
				}
				if errors.Is(err, inbox.ErrCommitUnknown) != commit {
					t.Errorf("SettleBatch = %v; want ErrCommitUnknown only where the COMMIT failed", err)
				}
				if err := f.ReleaseBatch(context.Background(), ds); !errors.Is(err, inbox.ErrClosed) {
					t.Errorf("ReleaseBatch after the failed settlement: %v, want ErrClosed", err)
				}
				fx.closed(t, f)
			})
		}
	}
}

// TestRowlockBatchCloseRollsBack: Close rolls back a batch still held and frees the batch
// claim statement; the batch then no longer settles.
func TestRowlockBatchCloseRollsBack(t *testing.T) {
	fx, f := openRowlock(t, mariadbSerializable, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
	fx.expectRowlockSettlePrepares()
	fx.expectRowlockClaim("claim(3)", row{id: 1}, row{id: 2})
	fx.mock.ExpectRollback()

	ds := claimBatch(t, f, 3, 2)
	fx.closed(t, f)
	if err := f.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("SettleBatch after Close: %v, want ErrClosed", err)
	}
	if _, err := f.ClaimBatch(context.Background(), 3); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("ClaimBatch after Close: %v, want ErrClosed", err)
	}
	fx.checkLevels(t, 1)
}
