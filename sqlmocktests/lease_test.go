package sqlmocktests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// leaseJobs has a payload, an attempt and a retry_after column; ack deletes.
var leaseJobs = inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after"}

// leaseDone has an attempt and a processed_at column, and no retry_after.
var leaseDone = inbox.Table{Name: "done", ID: "id", Attempt: "attempt", ProcessedAt: "processed_at"}

// leaseStatements is the SQL the lease form runs on one table under one dialect, written out
// here so that the tests pin it.
type leaseStatements struct {
	claim      string // Postgres: the claim; MySQL, MariaDB, SQLite: the claim's SELECT
	stamp      string // MySQL, MariaDB, SQLite: the claim's UPDATE of one row
	extend     string
	ack        string
	retry      string
	retryAfter string // empty: the table has no retry_after column
}

type leaseCase struct {
	name            string
	d               dialect.Dialect
	txd             dialect.Dialect // for the transactional test: a declared level or mode
	version, answer string          // the server version query and its answer
	jobs, done      leaseStatements
}

var (
	leaseMySQLJobs = leaseStatements{
		claim:      "SELECT `id`, `payload`, `attempt` FROM `jobs` WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND (`locked_until` IS NULL OR `locked_until` < ?) ORDER BY `retry_after`, `id` LIMIT ? FOR UPDATE SKIP LOCKED",
		stamp:      "UPDATE `jobs` SET `locked_until` = ?, `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` IN (?)",
		extend:     "UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?",
		ack:        "DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?",
		retry:      "UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?",
		retryAfter: "UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?",
	}
	leaseMySQLDone = leaseStatements{
		claim:  "SELECT `id`, `attempt` FROM `done` WHERE `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` < ?) ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED",
		stamp:  "UPDATE `done` SET `locked_until` = ?, `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` IN (?)",
		extend: "UPDATE `done` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?",
		ack:    "UPDATE `done` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?",
		retry:  "UPDATE `done` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?",
	}
)

var leaseCases = []leaseCase{
	{
		name: "postgres", d: dialect.Postgres[isolation.Default]{}, txd: dialect.Postgres[isolation.ReadCommitted]{},
		version: "SHOW server_version_num", answer: "160004",
		jobs: leaseStatements{
			claim: `WITH inbox_lease_pick AS (SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND ("locked_until" IS NULL OR "locked_until" < $2) ORDER BY "retry_after" NULLS FIRST, "id" LIMIT $3 FOR UPDATE SKIP LOCKED), ` +
				`inbox_lease_claimed AS (UPDATE "jobs" SET "locked_until" = $4, "attempt" = COALESCE("attempt", 0) + 1 FROM inbox_lease_pick WHERE "jobs"."id" = inbox_lease_pick."id" RETURNING "jobs"."id", "jobs"."payload", "jobs"."attempt", "jobs"."retry_after") ` +
				`SELECT "id", "payload", "attempt" FROM inbox_lease_claimed ORDER BY "retry_after" NULLS FIRST, "id"`,
			extend:     `UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3`,
			ack:        `DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2`,
			retry:      `UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2`,
			retryAfter: `UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3`,
		},
		done: leaseStatements{
			claim: `WITH inbox_lease_pick AS (SELECT "id" FROM "done" WHERE "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" < $1) ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED), ` +
				`inbox_lease_claimed AS (UPDATE "done" SET "locked_until" = $3, "attempt" = COALESCE("attempt", 0) + 1 FROM inbox_lease_pick WHERE "done"."id" = inbox_lease_pick."id" RETURNING "done"."id", "done"."attempt") ` +
				`SELECT "id", "attempt" FROM inbox_lease_claimed ORDER BY "id"`,
			extend: `UPDATE "done" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3`,
			ack:    `UPDATE "done" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3`,
			retry:  `UPDATE "done" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2`,
		},
	},
	{
		name: "mysql", d: dialect.MySQL[isolation.Default]{}, txd: dialect.MySQL[isolation.RepeatableRead]{},
		version: "SELECT VERSION()", answer: "8.0.36",
		jobs: leaseMySQLJobs, done: leaseMySQLDone,
	},
	{
		name: "mariadb", d: dialect.MariaDB[isolation.Default]{}, txd: dialect.MariaDB[isolation.Serializable]{},
		version: "SELECT VERSION()", answer: "10.11.6-MariaDB-0+deb12u1",
		jobs: leaseMySQLJobs, done: leaseMySQLDone,
	},
	{
		name: "sqlite", d: dialect.SQLite[isolation.Default]{}, txd: dialect.SQLite[isolation.Immediate]{},
		version: "SELECT sqlite_version()", answer: "3.45.1",
		jobs: leaseStatements{
			claim:      strings.TrimSuffix(leaseMySQLJobs.claim, " FOR UPDATE SKIP LOCKED"),
			stamp:      leaseMySQLJobs.stamp,
			extend:     leaseMySQLJobs.extend,
			ack:        leaseMySQLJobs.ack,
			retry:      leaseMySQLJobs.retry,
			retryAfter: leaseMySQLJobs.retryAfter,
		},
		done: leaseStatements{
			claim:  strings.TrimSuffix(leaseMySQLDone.claim, " FOR UPDATE SKIP LOCKED"),
			stamp:  leaseMySQLDone.stamp,
			extend: leaseMySQLDone.extend,
			ack:    leaseMySQLDone.ack,
			retry:  leaseMySQLDone.retry,
		},
	},
}

func (c leaseCase) mysqlFamily() bool { return c.name == "mysql" || c.name == "mariadb" }

// expectOpen expects what Open runs: the server version, the table's columns from the catalog,
// then each statement prepared (and on SQLite compiled with EXPLAIN, since its driver prepares
// lazily). Every prepared statement must be closed by the end.
func expectOpen(m *recorder, c leaseCase, st leaseStatements, table string) {
	m.mock.ExpectQuery(c.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(c.answer))
	tbl := leaseJobs
	if table == leaseDone.Name {
		tbl = leaseDone
	}
	expectColumns(m.mock, c.name, tbl, "locked_until")
	for _, s := range []string{st.claim, st.stamp, st.extend, st.ack, st.retry, st.retryAfter} {
		if s == "" {
			continue
		}
		m.mock.ExpectPrepare(s).WillBeClosed()
		if c.name == "sqlite" {
			m.mock.ExpectQuery("EXPLAIN " + s).WithArgs(make([]driver.Value, strings.Count(s, "?"))...).
				WillReturnRows(sqlmock.NewRows([]string{"addr", "opcode"}))
		}
	}
}

// leaseClaimed is one row a mocked claim returns: its id and the attempt the claim wrote.
type leaseClaimed struct {
	id, attempt int64
}

// expectClaim expects a claim of one row on table jobs (with payload and retry_after) or done
// (without), returning rows, and records the token it writes in token.
func expectClaim(m *recorder, c leaseCase, st leaseStatements, jobs bool, token *driver.Value, rows ...leaseClaimed) {
	expectClaimOf(m, c, st, 1, jobs, token, rows...)
}

// expectClaimOf expects a claim of at most max rows; on MySQL and MariaDB st.stamp must take
// max ids (a short claim repeats its last id), on SQLite as many ids as rows.
func expectClaimOf(m *recorder, c leaseCase, st leaseStatements, max int64, jobs bool, token *driver.Value, rows ...leaseClaimed) {
	now := time.Now()
	at := leaseTime{want: now}
	tok := leaseTime{want: now.Add(lease.DefaultLease), into: token}
	var due []driver.Value
	cols := []string{"id", "attempt"}
	if jobs {
		due = []driver.Value{at} // retry_after <= now
		cols = []string{"id", "payload", "attempt"}
	}
	result := sqlmock.NewRows(cols)
	for _, r := range rows {
		attempt := r.attempt
		if c.name != "postgres" {
			attempt-- // the SELECT reads the attempt before the stamp counts this one
		}
		vals := []driver.Value{r.id, attempt}
		if jobs {
			vals = []driver.Value{r.id, []byte("payload"), attempt}
		}
		result.AddRow(vals...)
	}
	if c.name == "postgres" {
		m.mock.ExpectQuery(st.claim).WithArgs(append(due, at, max, tok)...).WillReturnRows(result)
		return
	}
	stampArgs := []driver.Value{tok}
	stampIDs := int(max)
	if c.name == "sqlite" && len(rows) > 0 {
		stampIDs = len(rows)
		st.stamp = strings.Replace(st.stamp, "IN (?)", "IN (?"+strings.Repeat(", ?", stampIDs-1)+")", 1)
	}
	for i := range stampIDs * min(len(rows), 1) {
		stampArgs = append(stampArgs, rows[min(i, len(rows)-1)].id)
	}
	if c.name == "sqlite" {
		m.mock.ExpectExec("BEGIN IMMEDIATE").WillReturnResult(leaseResult(0)) // whatever the dialect's mode
	} else {
		m.mock.ExpectBegin()
	}
	m.mock.ExpectQuery(st.claim).WithArgs(append(due, at, max)...).WillReturnRows(result)
	if len(rows) > 0 {
		m.mock.ExpectExec(st.stamp).WithArgs(stampArgs...).WillReturnResult(sqlmock.NewResult(0, int64(len(rows))))
	}
	if c.name == "sqlite" {
		m.mock.ExpectExec("COMMIT").WillReturnResult(leaseResult(0))
	} else {
		m.mock.ExpectCommit()
	}
}

// claimOne claims with max 1 and checks the one delivery it expects.
func claimOne(t *testing.T, f inbox.Form, id int64, attempt int) *inbox.Delivery {
	t.Helper()
	ds, err := f.Claim(context.Background(), 1)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(ds) != 1 || ds[0].ID != id || ds[0].Attempt != attempt {
		t.Fatalf("claimed %+v, want row %d at attempt %d", ds, id, attempt)
	}
	return ds[0]
}

func leaseResult(n int64) driver.Result { return sqlmock.NewResult(0, n) }

// TestLeaseSequence pins each dialect's statements for a claim, an extension, every outcome,
// a release, a lost lease and an empty claim, each guarded by the token the claim wrote.
func TestLeaseSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.jobs
			expectOpen(m, c, st, "jobs")
			f := lease.New(c.d, leaseJobs, nil)
			plan, err := f.Open(ctx, m.db, inbox.Queue{})
			if err != nil {
				t.Fatal(err)
			}
			want := inbox.Plan{Table: "jobs", Form: "lease", ExtendEvery: 15 * time.Second, SerialClaims: c.name == "sqlite", Dialect: c.d, Described: leaseJobs}
			if plan.FindUnclaimable == nil {
				t.Error("the plan offers no search for unclaimable rows")
			}
			if fused := plan.SettleAndClaim != nil; fused != (c.name == "sqlite") {
				t.Errorf("the plan offers SettleAndClaim: %v; want it on SQLite only", fused)
			}
			plan.FindUnclaimable, plan.SettleAndClaim = nil, nil
			if !reflect.DeepEqual(plan, want) {
				t.Errorf("plan %+v, want %+v", plan, want)
			}

			// Claim, extend, ack: the extension is guarded by the claim's token, and the ack by
			// the extension's.
			var claimed, extended driver.Value
			expectClaim(m, c, st, true, &claimed, leaseClaimed{7, 1})
			m.mock.ExpectExec(st.extend).WithArgs(leaseTime{want: time.Now().Add(lease.DefaultLease), into: &extended}, int64(7), leaseSame{&claimed}).WillReturnResult(leaseResult(1))
			m.mock.ExpectExec(st.ack).WithArgs(int64(7), leaseSame{&extended}).WillReturnResult(leaseResult(1))
			d := claimOne(t, f, 7, 1)
			if string(d.Payload) != "payload" {
				t.Errorf("payload %q", d.Payload)
			}
			if err := f.Extend(ctx, d); err != nil {
				t.Fatal(err)
			}
			if claimed == extended {
				t.Errorf("the extension wrote the token it held (%v)", claimed)
			}
			if err := f.Settle(ctx, d, outcome.Ack()); err != nil {
				t.Fatal(err)
			}

			// Retry only clears the lease: the claim counted the attempt.
			var token driver.Value
			expectClaim(m, c, st, true, &token, leaseClaimed{8, 2})
			m.mock.ExpectExec(st.retry).WithArgs(int64(8), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Settle(ctx, claimOne(t, f, 8, 2), outcome.Retry()); err != nil {
				t.Fatal(err)
			}

			// RetryAfter sets retry_after and clears the lease.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{9, 1})
			m.mock.ExpectExec(st.retryAfter).WithArgs(leaseTime{want: time.Now().Add(time.Minute)}, int64(9), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Settle(ctx, claimOne(t, f, 9, 1), outcome.RetryAfter(time.Minute)); err != nil {
				t.Fatal(err)
			}

			// Release clears the lease.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{10, 1})
			m.mock.ExpectExec(st.retry).WithArgs(int64(10), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Release(ctx, claimOne(t, f, 10, 1)); err != nil {
				t.Fatal(err)
			}

			// A lease lost: the extension and the ack change no row.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{11, 1})
			m.mock.ExpectExec(st.extend).WithArgs(leaseTime{want: time.Now().Add(lease.DefaultLease)}, int64(11), leaseSame{&token}).WillReturnResult(leaseResult(0))
			m.mock.ExpectExec(st.ack).WithArgs(int64(11), leaseSame{&token}).WillReturnResult(leaseResult(0))
			d = claimOne(t, f, 11, 1)
			if err := f.Extend(ctx, d); !errors.Is(err, inbox.ErrLeaseLost) || !strings.Contains(err.Error(), `"jobs", row 11`) {
				t.Errorf("extension of a lost lease: %v, want ErrLeaseLost naming the table and row", err)
			}
			if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrLeaseLost) || !strings.Contains(err.Error(), `"jobs", row 11`) {
				t.Errorf("ack of a lost lease: %v, want ErrLeaseLost naming the table and row", err)
			}
			if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("second settlement of one delivery: %v, want ErrClosed", err)
			}

			// An empty claim.
			expectClaim(m, c, st, true, nil)
			if ds, err := f.Claim(ctx, 1); err != nil || len(ds) != 0 {
				t.Errorf("empty claim: %v, %v", ds, err)
			}

			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Claim(ctx, 1); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("Claim after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestLeaseSequenceProcessedAt pins the settlements of a table with processed_at and without
// retry_after: ack and drop stamp processed_at; RetryAfter retries at once, with a warning.
func TestLeaseSequenceProcessedAt(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.done
			expectOpen(m, c, st, "done")
			var log logBuffer
			f := lease.New(c.d, leaseDone, nil)
			if _, err := f.Open(ctx, m.db, inbox.Queue{Logger: log.Logger()}); err != nil {
				t.Fatal(err)
			}

			var token driver.Value
			expectClaim(m, c, st, false, &token, leaseClaimed{3, 1})
			m.mock.ExpectExec(st.ack).WithArgs(leaseTime{want: time.Now()}, int64(3), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Settle(ctx, claimOne(t, f, 3, 1), outcome.Drop()); err != nil {
				t.Fatal(err)
			}

			token = nil
			expectClaim(m, c, st, false, &token, leaseClaimed{4, 1})
			m.mock.ExpectExec(st.retry).WithArgs(int64(4), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Settle(ctx, claimOne(t, f, 4, 1), outcome.RetryAfter(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "table=done") {
				t.Errorf("RetryAfter without a retry_after column logged %q, want a warning naming the table", log.String())
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// expectBegin, expectCommit and expectRollback expect the handler's transaction at the
// transactional case's level: database/sql's on Postgres, MySQL and MariaDB, statements on
// SQLite's pinned connection.
func expectBegin(m *recorder, c leaseCase) {
	if c.name == "sqlite" {
		m.mock.ExpectExec("BEGIN IMMEDIATE").WillReturnResult(leaseResult(0))
		return
	}
	m.mock.ExpectBegin()
}

func expectCommit(m *recorder, c leaseCase, err error) {
	if c.name != "sqlite" {
		m.mock.ExpectCommit().WillReturnError(err)
		return
	}
	if err == nil {
		m.mock.ExpectExec("COMMIT").WillReturnResult(leaseResult(0))
		return
	}
	m.mock.ExpectExec("COMMIT").WillReturnError(err)
	m.mock.ExpectExec("ROLLBACK").WillReturnResult(leaseResult(0)) // a failed COMMIT leaves SQLite's transaction open
}

func expectRollback(m *recorder, c leaseCase) {
	if c.name == "sqlite" {
		m.mock.ExpectExec("ROLLBACK").WillReturnResult(leaseResult(0))
		return
	}
	m.mock.ExpectRollback()
}

// TestLeaseTransactionalSequence pins transactional mode: after the claim commits, a
// transaction per delivery at the dialect's level; Ack settles inside it and commits; other
// outcomes roll it back and settle outside; a lost lease rolls back; a failed commit returns
// its error and runs nothing more.
func TestLeaseTransactionalSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.jobs
			expectOpen(m, c, st, "jobs")
			f := lease.New(c.txd, leaseJobs, nil)
			plan, err := f.Open(ctx, m.db, inbox.Queue{Transactional: true})
			if err != nil {
				t.Fatal(err)
			}
			if !plan.HoldsConnection {
				t.Error("transactional plan does not hold a connection")
			}
			const write = "INSERT INTO side (n) VALUES (1)"

			// Ack: the handler's write and the settlement commit together.
			var token driver.Value
			expectClaim(m, c, st, true, &token, leaseClaimed{7, 1})
			expectBegin(m, c)
			m.mock.ExpectExec(write).WillReturnResult(leaseResult(1))
			m.mock.ExpectExec(st.ack).WithArgs(int64(7), leaseSame{&token}).WillReturnResult(leaseResult(1))
			expectCommit(m, c, nil)
			d := claimOne(t, f, 7, 1)
			if d.Tx == nil {
				t.Fatal("no Delivery.Tx in transactional mode")
			}
			if _, err := d.Tx.ExecContext(ctx, write); err != nil {
				t.Fatal(err)
			}
			if err := f.Settle(ctx, d, outcome.Ack()); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Tx.ExecContext(ctx, write); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Errorf("the handler's transaction after settlement: %v, want ErrTransactionHeld", err)
			}

			// Retry: rolled back, then settled outside.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{8, 1})
			expectBegin(m, c)
			expectRollback(m, c)
			m.mock.ExpectExec(st.retry).WithArgs(int64(8), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Settle(ctx, claimOne(t, f, 8, 1), outcome.Retry()); err != nil {
				t.Fatal(err)
			}

			// A lost lease: the ack inside the transaction changes nothing, and it rolls back.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{9, 1})
			expectBegin(m, c)
			m.mock.ExpectExec(st.ack).WithArgs(int64(9), leaseSame{&token}).WillReturnResult(leaseResult(0))
			expectRollback(m, c)
			if err := f.Settle(ctx, claimOne(t, f, 9, 1), outcome.Ack()); !errors.Is(err, inbox.ErrLeaseLost) {
				t.Errorf("transactional ack of a lost lease: %v, want ErrLeaseLost", err)
			}

			// Release: rolled back, and the lease cleared.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{11, 1})
			expectBegin(m, c)
			expectRollback(m, c)
			m.mock.ExpectExec(st.retry).WithArgs(int64(11), leaseSame{&token}).WillReturnResult(leaseResult(1))
			if err := f.Release(ctx, claimOne(t, f, 11, 1)); err != nil {
				t.Fatal(err)
			}

			// A failed commit: its error, and nothing more (the row stays leased until expiry).
			// On the servers the connection is discarded, since the COMMIT's outcome is unknown;
			// on SQLite the ROLLBACK after it leaves the connection clean.
			token = nil
			expectClaim(m, c, st, true, &token, leaseClaimed{10, 1})
			expectBegin(m, c)
			m.mock.ExpectExec(st.ack).WithArgs(int64(10), leaseSame{&token}).WillReturnResult(leaseResult(1))
			expectCommit(m, c, errors.New("disk I/O error"))
			if c.name != "sqlite" {
				m.mock.ExpectClose()
			}
			err = f.Settle(ctx, claimOne(t, f, 10, 1), outcome.Ack())
			if err == nil || !strings.Contains(err.Error(), "disk I/O error") || !strings.Contains(err.Error(), `"jobs", row 10`) {
				t.Errorf("ack whose commit failed: %v, want the commit's error naming the table and row", err)
			}
			if unknown := errors.Is(err, inbox.ErrCommitUnknown); unknown != (c.name != "sqlite") {
				t.Errorf("ack whose commit failed: %v: wraps ErrCommitUnknown %v, want it only on the servers", err, unknown)
			}

			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if c.mysqlFamily() {
				// Each claim runs at READ COMMITTED whatever the dialect's level; the handler's
				// transaction at the dialect's.
				handler := sql.LevelRepeatableRead
				if c.name == "mariadb" {
					handler = sql.LevelSerializable
				}
				levels := m.Levels()
				for i, l := range levels {
					want := sql.LevelReadCommitted
					if i%2 == 1 {
						want = handler
					}
					if l != want {
						t.Errorf("transaction %d began at %v, want %v (levels %v)", i, l, want, levels)
					}
				}
				if len(levels) != 10 {
					t.Errorf("%d transactions begun, want 10 (a claim and a handler's for each of 5 rows)", len(levels))
				}
			}
		})
	}
}

// TestLeaseClaimTransactionEnds: on MySQL and MariaDB the claim runs in a transaction; a
// COMMIT or a ROLLBACK of it that fails discards its connection rather than returning it to
// the pool with the claim's row locks held, and a COMMIT whose outcome is unknown says that
// the rows, if it committed, return when their lease runs out.
func TestLeaseClaimTransactionEnds(t *testing.T) {
	broken := errors.New("write: broken pipe")
	for _, c := range leaseCases {
		if !c.mysqlFamily() {
			continue
		}
		st := c.jobs
		claimed := func() *sqlmock.Rows {
			return sqlmock.NewRows([]string{"id", "payload", "attempt"}).AddRow(int64(7), []byte("payload"), int64(0))
		}
		t.Run(c.name+"/commit", func(t *testing.T) {
			m := newRecorder(t, 1)
			expectOpen(m, c, st, "jobs")
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(st.claim).WillReturnRows(claimed())
			m.mock.ExpectExec(st.stamp).WillReturnResult(leaseResult(1))
			m.mock.ExpectCommit().WillReturnError(broken)
			m.mock.ExpectClose()
			f := lease.New(c.d, leaseJobs, nil)
			if _, err := f.Open(context.Background(), m.db, inbox.Queue{}); err != nil {
				t.Fatal(err)
			}
			ds, err := f.Claim(context.Background(), 1)
			if len(ds) != 0 || !errors.Is(err, broken) || !errors.Is(err, inbox.ErrCommitUnknown) || !strings.Contains(err.Error(), "lease runs out") {
				t.Fatalf("Claim = %v, %v; want no rows and the COMMIT's error, its outcome unknown, saying when the rows return", ds, err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatalf("the connection of the failed COMMIT was not discarded: %v", err)
			}
		})
		t.Run(c.name+"/rollback", func(t *testing.T) {
			m := newRecorder(t, 1)
			expectOpen(m, c, st, "jobs")
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(st.claim).WillReturnRows(claimed())
			m.mock.ExpectExec(st.stamp).WillReturnError(errors.New("Error 1317 (70100): Query execution was interrupted"))
			m.mock.ExpectRollback().WillReturnError(broken)
			m.mock.ExpectClose()
			f := lease.New(c.d, leaseJobs, nil)
			if _, err := f.Open(context.Background(), m.db, inbox.Queue{}); err != nil {
				t.Fatal(err)
			}
			if ds, err := f.Claim(context.Background(), 1); len(ds) != 0 || err == nil {
				t.Fatalf("Claim = %v, %v; want no rows and the stamp's error", ds, err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatalf("the connection of the failed ROLLBACK was not discarded: %v", err)
			}
		})
	}
}

// TestLeaseOpenRefusals pins what Open refuses, and that it refuses before running anything it
// need not.
func TestLeaseOpenRefusals(t *testing.T) {
	ctx := context.Background()
	mysql, postgres, sqlite := leaseCases[1], leaseCases[0], leaseCases[3]
	withoutAttempt := leaseJobs
	withoutAttempt.Attempt = ""

	t.Run("postgres strict level, transactional", func(t *testing.T) {
		m := newRecorder(t, 1) // no expectations: nothing may run
		for _, d := range []dialect.Dialect{dialect.Postgres[isolation.RepeatableRead]{}, dialect.Postgres[isolation.Serializable]{}} {
			_, err := lease.New(d, leaseJobs, nil).Open(ctx, m.db, inbox.Queue{Transactional: true})
			if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), string(d.Level())) || !strings.Contains(err.Error(), "isolation.ReadCommitted") {
				t.Errorf("%s: %v, want ErrDialect naming the table, the level and what to use", d.Level(), err)
			}
		}
	})

	t.Run("lease length", func(t *testing.T) {
		m := newRecorder(t, 1)
		for _, l := range []time.Duration{1500 * time.Millisecond, 500 * time.Millisecond, -time.Second} {
			_, err := lease.New(postgres.d, leaseJobs, &lease.Config{Lease: l}).Open(ctx, m.db, inbox.Queue{})
			if err == nil || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "lease.Config.Lease") {
				t.Errorf("lease %v: %v, want an error naming the table and lease.Config.Lease", l, err)
			}
		}
	})

	t.Run("server too old", func(t *testing.T) {
		m := newRecorder(t, 1)
		m.mock.ExpectQuery(mysql.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow("5.7.44"))
		if _, err := lease.New(mysql.d, leaseJobs, nil).Open(ctx, m.db, inbox.Queue{}); !errors.Is(err, inbox.ErrServerTooOld) {
			t.Errorf("MySQL 5.7: %v, want ErrServerTooOld", err)
		}
	})

	t.Run("missing column", func(t *testing.T) {
		m := newRecorder(t, 1)
		m.mock.ExpectQuery(postgres.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(postgres.answer))
		expectColumns(m.mock, "postgres", withoutAttempt, "locked_until") // a missing column is the statements' to name
		for range 2 {                                                     // a refused statement is refused again: it is the schema, not the connection
			m.mock.ExpectPrepare(postgres.jobs.claim).WillReturnError(errors.New(`ERROR: column "attempt" does not exist (SQLSTATE 42703)`))
		}
		_, err := lease.New(postgres.d, leaseJobs, nil).Open(ctx, m.db, inbox.Queue{})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "claim statement") {
			t.Errorf("%v, want ErrSchema naming the table and the statement", err)
		}
	})

	t.Run("missing column on sqlite", func(t *testing.T) {
		m := newRecorder(t, 1)
		st := sqlite.jobs
		m.mock.ExpectQuery(sqlite.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(sqlite.answer))
		expectColumns(m.mock, "sqlite", withoutAttempt, "locked_until")
		for range 2 { // a refused statement is refused again: it is the schema, not the connection
			m.mock.ExpectPrepare(st.claim).WillBeClosed()
			m.mock.ExpectQuery("EXPLAIN "+st.claim).WithArgs(nil, nil, nil).WillReturnError(errors.New("SQL logic error: no such column: attempt (1)"))
		}
		_, err := lease.New(sqlite.d, leaseJobs, nil).Open(ctx, m.db, inbox.Queue{})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "claim statement") {
			t.Errorf("%v, want ErrSchema naming the table and the statement", err)
		}
	})

	for _, lossy := range [][]driver.Value{
		{"datetime", "datetime", int64(0)},
		{"datetime(3)", "datetime", int64(3)},
		{"varchar(40)", "varchar", nil},
	} {
		t.Run("lease column without microseconds: "+lossy[0].(string), func(t *testing.T) {
			m := newRecorder(t, 1)
			m.mock.ExpectQuery(mysql.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(mysql.answer))
			m.mock.ExpectQuery(schemaMySQLColumns).WithArgs("jobs").WillReturnRows(
				sqlmock.NewRows([]string{"COLUMN_NAME", "COLUMN_TYPE", "DATA_TYPE", "DATETIME_PRECISION", "IS_NULLABLE", "EXTRA"}).
					AddRow("id", "bigint(20)", "bigint", nil, "NO", "auto_increment").
					AddRow("locked_until", lossy[0], lossy[1], lossy[2], "YES", ""))
			_, err := lease.New(mysql.d, leaseJobs, nil).Open(ctx, m.db, inbox.Queue{})
			want := "ALTER TABLE `jobs` MODIFY `locked_until` DATETIME(6) NULL"
			if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), `"locked_until"`) || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %v, want ErrSchema naming the table, the column and %s", lossy[0], err, want)
			}
		})
	}
}

// TestLeaseOpenOnSQLiteBeforeTableList: SQLite before 3.37 has no pragma_table_list, and no
// STRICT tables either: the catalog query that asks fails, the version says why, and Open goes
// on with the table taken as not STRICT.
func TestLeaseOpenOnSQLiteBeforeTableList(t *testing.T) {
	c := leaseCases[3]
	st := c.jobs
	m := newRecorder(t, 1)
	m.mock.ExpectQuery(c.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow("3.36.0"))
	m.mock.ExpectQuery(schemaSQLiteColumns).WithArgs("jobs").WillReturnRows(sqlmock.NewRows([]string{"name", "type", "notnull"}).
		AddRow("id", "INTEGER", true).AddRow("locked_until", "DATETIME", false))
	m.mock.ExpectQuery(schemaSQLiteStrict).WithArgs("jobs").WillReturnError(errors.New("SQL logic error: no such table: pragma_table_list (1)"))
	m.mock.ExpectQuery("SELECT sqlite_version()").WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow("3.36.0"))
	for _, s := range []string{st.claim, st.stamp, st.extend, st.ack, st.retry, st.retryAfter} {
		m.mock.ExpectPrepare(s).WillBeClosed()
		m.mock.ExpectQuery("EXPLAIN " + s).WithArgs(make([]driver.Value, strings.Count(s, "?"))...).
			WillReturnRows(sqlmock.NewRows([]string{"addr", "opcode"}))
	}
	f := lease.New(c.d, leaseJobs, nil)
	if _, err := f.Open(context.Background(), m.db, inbox.Queue{}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseTransactionEnded: once the database has ended the handler's transaction (a
// deadlock), its later statements are refused without reaching the server, and an Ack runs no
// settlement in it (it would run in autocommit): Settle fails with ErrTransactionEnded, rolls
// back and clears the lease, so the row is claimable again at once.
func TestLeaseTransactionEnded(t *testing.T) {
	deadlock := errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")
	for _, c := range leaseCases {
		if !c.mysqlFamily() {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.jobs
			expectOpen(m, c, st, "jobs")
			f := lease.New(c.txd, leaseJobs, nil)
			if _, err := f.Open(ctx, m.db, inbox.Queue{Transactional: true}); err != nil {
				t.Fatal(err)
			}
			var token driver.Value
			expectClaim(m, c, st, true, &token, leaseClaimed{7, 1})
			expectBegin(m, c)
			m.mock.ExpectExec("UPDATE accounts SET balance = 0").WillReturnError(deadlock)
			if c.name == "mariadb" {
				m.mock.ExpectQuery("SELECT @@in_transaction").WillReturnRows(sqlmock.NewRows([]string{"@@in_transaction"}).AddRow(0))
			}
			expectRollback(m, c)
			m.mock.ExpectExec(st.retry).WithArgs(int64(7), leaseSame{&token}).WillReturnResult(leaseResult(1))

			d := claimOne(t, f, 7, 1)
			if _, err := d.Tx.ExecContext(ctx, "UPDATE accounts SET balance = 0"); !errors.Is(err, deadlock) {
				t.Fatalf("the failing statement: %v, want the deadlock", err)
			}
			if _, err := d.Tx.ExecContext(ctx, "INSERT INTO side (n) VALUES (1)"); !errors.Is(err, inbox.ErrTransactionEnded) {
				t.Errorf("the statement after the deadlock: %v, want ErrTransactionEnded", err)
			}
			if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrTransactionEnded) {
				t.Errorf("Settle = %v, want ErrTransactionEnded", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLeaseClaimRetriesConflicts: on MySQL and MariaDB a claim whose transaction meets a
// conflict (a deadlock; on a Galera node, a certification failure at COMMIT, 1213) changed
// nothing and is claimed again at once, and the row reaches the caller without an error.
func TestLeaseClaimRetriesConflicts(t *testing.T) {
	for _, c := range leaseCases {
		if !c.mysqlFamily() {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			st := c.jobs
			m := newRecorder(t, 1)
			expectOpen(m, c, st, "jobs")
			claimed := func() *sqlmock.Rows {
				return sqlmock.NewRows([]string{"id", "payload", "attempt"}).AddRow(int64(7), []byte("payload"), int64(0))
			}
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(st.claim).WillReturnRows(claimed())
			m.mock.ExpectExec(st.stamp).WillReturnError(errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"))
			m.mock.ExpectRollback()
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(st.claim).WillReturnRows(claimed())
			m.mock.ExpectExec(st.stamp).WillReturnResult(leaseResult(1))
			m.mock.ExpectCommit()
			f := lease.New(c.d, leaseJobs, nil)
			if _, err := f.Open(context.Background(), m.db, inbox.Queue{}); err != nil {
				t.Fatal(err)
			}
			ds, err := f.Claim(context.Background(), 1)
			if err != nil || len(ds) != 1 || ds[0].ID != 7 || ds[0].Attempt != 1 {
				t.Fatalf("Claim = %v, %v; want row 7 at attempt 1 after the conflict", ds, err)
			}
		})
	}
}
