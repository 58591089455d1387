package sqlmocktests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
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

var (
	leaseCases = []dbCase{onPostgres, onMySQL, onMariaDB, onSQLite}
	// leaseTxCases are the databases at a declared level or mode, for transactional mode; level
	// is the handler's transaction's.
	leaseTxCases = []dbCase{
		{name: "postgres", db: "postgres", d: dialect.Postgres[isolation.ReadCommitted]{}, level: sql.LevelReadCommitted},
		{name: "mysql", db: "mysql", d: dialect.MySQL[isolation.RepeatableRead]{}, level: sql.LevelRepeatableRead},
		{name: "mariadb", db: "mariadb", d: dialect.MariaDB[isolation.Serializable]{}, level: sql.LevelSerializable},
		{name: "sqlite", db: "sqlite", d: dialect.SQLite[isolation.Immediate]{}},
	}
)

// leaseRow is a row a lease claim returns: its id, the attempt the claim writes, and a payload.
func leaseRow(id, attempt int64) row {
	return row{id: id, attempt: attempt, payload: []byte("payload")}
}

// leaseClaimArgs are the arguments of a lease claim of at most max rows at now, but the token
// Postgres's claim writes: now for retry_after and the queue where the table has them, the
// pause's key, now for the lease, and max, except on Postgres, whose claim has its limit in its text (as it has the
// queue's kinds).
func (fx *fixture) leaseClaimArgs(now time.Time, max int) []driver.Value {
	var args []driver.Value
	if fx.sh.table.RetryAfter != "" {
		args = append(args, fx.c.near(now))
	}
	if fx.sh.table.Queue != "" {
		args = append(args, fx.q.Name)
	}
	args = append(args, fx.pauseArgs()...)
	args = append(args, fx.c.near(now))
	if fx.c.db == "postgres" {
		return args
	}
	return append(args, int64(max))
}

// leaseClaimSQL is the claim of at most max rows: on Postgres, whose claim has its limit in its
// text, the golden file's claim(max) where max is not 1, expected prepared when first asked for
// (Open prepares the claim of one row).
func (fx *fixture) leaseClaimSQL(max int) string {
	if fx.c.db != "postgres" || max == 1 {
		return fx.sql("claim")
	}
	query := fx.sql(fmt.Sprintf("claim(%d)", max))
	if !fx.claims[max] {
		if fx.claims == nil {
			fx.claims = map[int]bool{}
		}
		fx.claims[max] = true
		fx.expectPrepare(query)
	}
	return query
}

// expectLeaseClaim expects a claim of at most max rows returning rows, and records the token it
// writes in token, where token is set. On Postgres the claim is one statement; on MySQL and
// MariaDB a transaction of its SELECT, which reads each attempt before the stamp counts it, and
// a stamp of max ids (a short claim repeats its last id); on SQLite the same, the stamp over as
// many ids as rows.
func (fx *fixture) expectLeaseClaim(max int, token *driver.Value, rows ...row) {
	now := time.Now()
	args := fx.leaseClaimArgs(now, max)
	tok := fx.c.token(now.Add(lease.DefaultLease), token)
	if fx.c.db == "postgres" {
		fx.mock.ExpectQuery(fx.leaseClaimSQL(max)).WithArgs(append(args, tok)...).WillReturnRows(fx.sh.claimed(fx.q.Name, rows...))
		return
	}
	read := make([]row, len(rows))
	for i, r := range rows {
		read[i] = r
		read[i].attempt--
	}
	fx.expectBegin()
	fx.mock.ExpectQuery(fx.sql("claim")).WithArgs(args...).WillReturnRows(fx.sh.claimed(fx.q.Name, read...))
	if len(rows) > 0 {
		n := max
		if fx.c.db == "sqlite" {
			n = len(rows)
		}
		stamp := []driver.Value{tok}
		for i := range n {
			stamp = append(stamp, rows[min(i, len(rows)-1)].id)
		}
		fx.mock.ExpectExec(fx.sql(fmt.Sprintf("stamp(%d)", n))).WithArgs(stamp...).WillReturnResult(changed(int64(len(rows))))
	}
	fx.expectCommit(nil)
}

// claimOne claims with max 1 and checks the one delivery it expects.
func claimOne(t *testing.T, f inbox.Form, id int64, attempt int) *inbox.Delivery {
	t.Helper()
	ds := claimed(t, f.Claim, 1)
	if len(ds) != 1 || ds[0].ID != id || ds[0].Attempt != attempt {
		t.Fatalf("claimed %+v, want row %d at attempt %d", ds, id, attempt)
	}
	return ds[0]
}

// settleLeaseRow claims row id at attempt alone and settles it by o, expecting stmt with args
// and then the claim's token to change the row.
func (fx *fixture) settleLeaseRow(t *testing.T, f inbox.Form, id, attempt int64, o outcome.Outcome, stmt string, args ...driver.Value) {
	t.Helper()
	var token driver.Value
	fx.expectLeaseClaim(1, &token, leaseRow(id, attempt))
	fx.mock.ExpectExec(stmt).WithArgs(append(args, sameValue{&token})...).WillReturnResult(changed(1))
	settle(t, f, claimOne(t, f, id, int(attempt)), o)
}

// TestLeaseSequence pins each dialect's statements for a claim, an extension, every outcome,
// a release, a lost lease and an empty claim, each guarded by the token the claim wrote.
func TestLeaseSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{})
			plan := fx.plan
			described := fullShape.table
			described.LockedUntil = "locked_until" // the lease form's default column, named in the description it holds
			want := inbox.Plan{Table: "jobs", Form: "lease", ExtendEvery: 15 * time.Second, SerialClaims: c.db == "sqlite", Dialect: c.d, Described: described}
			if plan.FindUnclaimable == nil {
				t.Error("the plan offers no search for unclaimable rows")
			}
			if fused := plan.SettleAndClaim != nil; fused != (c.db == "sqlite") {
				t.Errorf("the plan offers SettleAndClaim: %v; want it on SQLite only", fused)
			}
			plan.FindUnclaimable, plan.SettleAndClaim = nil, nil
			if !reflect.DeepEqual(plan, want) {
				t.Errorf("plan %+v, want %+v", plan, want)
			}

			// Claim, extend, ack: the extension is guarded by the claim's token, and the ack by
			// the extension's.
			var claimed, extended driver.Value
			fx.expectLeaseClaim(1, &claimed, leaseRow(7, 1))
			fx.mock.ExpectExec(fx.sql("extend")).WithArgs(c.token(time.Now().Add(lease.DefaultLease), &extended), int64(7), sameValue{&claimed}).WillReturnResult(changed(1))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&extended}).WillReturnResult(changed(1))
			d := claimOne(t, f, 7, 1)
			if string(d.Payload) != "payload" {
				t.Errorf("payload %q", d.Payload)
			}
			extend(t, f, d)
			if claimed == extended {
				t.Errorf("the extension wrote the token it held (%v)", claimed)
			}
			settle(t, f, d, outcome.Ack())

			// Retry only clears the lease: the claim counted the attempt.
			fx.settleLeaseRow(t, f, 8, 2, outcome.Retry(), fx.sql("retry"), int64(8))

			// RetryAfter sets retry_after, and no last error, and clears the lease.
			fx.settleLeaseRow(t, f, 9, 1, outcome.RetryAfter(time.Minute), fx.sql("retryAfter"), c.near(time.Now().Add(time.Minute)), nil, int64(9))

			// Release clears the lease.
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(10, 1))
			fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(10), sameValue{&token}).WillReturnResult(changed(1))
			if err := f.Release(ctx, claimOne(t, f, 10, 1)); err != nil {
				t.Fatal(err)
			}

			// A lease lost: the extension and the ack change no row.
			token = nil
			fx.expectLeaseClaim(1, &token, leaseRow(11, 1))
			fx.mock.ExpectExec(fx.sql("extend")).WithArgs(c.near(time.Now().Add(lease.DefaultLease)), int64(11), sameValue{&token}).WillReturnResult(changed(0))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(11), sameValue{&token}).WillReturnResult(changed(0))
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
			fx.expectLeaseClaim(1, nil)
			if ds, err := f.Claim(ctx, 1); err != nil || len(ds) != 0 {
				t.Errorf("empty claim: %v, %v", ds, err)
			}

			fx.closed(t, f)
			if _, err := f.Claim(ctx, 1); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("Claim after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestLeaseSequenceMinimalTable pins the settlements of a table of an id and a payload: Ack and
// Drop delete the row; RetryAfter, without a retry_after column, retries at once, with a
// warning naming the table.
func TestLeaseSequenceMinimalTable(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, minimalShape, 1, inbox.Binding{})

			fx.settleLeaseRow(t, f, 3, 0, outcome.Drop(), fx.sql("ack"), int64(3))
			fx.settleLeaseRow(t, f, 4, 0, outcome.RetryAfter(time.Minute), fx.sql("retry"), int64(4))
			if !fx.warned("table=jobs") {
				t.Errorf("RetryAfter without a retry_after column logged %q, want a warning naming the table", fx.logs.String())
			}
			fx.closed(t, f)
		})
	}
}

// TestLeaseTransactionalSequence pins transactional mode: after the claim commits, a
// transaction per delivery at the dialect's level; Ack settles inside it and commits; other
// outcomes and Release roll it back and settle outside; a lost lease rolls back; a failed
// commit returns its error and runs nothing more.
func TestLeaseTransactionalSequence(t *testing.T) {
	for _, c := range leaseTxCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{Transactional: true})
			if !fx.plan.HoldsConnection {
				t.Error("transactional plan does not hold a connection")
			}
			const write = "INSERT INTO side (n) VALUES (1)"

			// Ack: the handler's write and the settlement commit together.
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(7, 1))
			fx.expectBegin()
			fx.mock.ExpectExec(write).WillReturnResult(changed(1))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&token}).WillReturnResult(changed(1))
			fx.expectCommit(nil)
			d := claimOne(t, f, 7, 1)
			if d.Tx == nil {
				t.Fatal("no Delivery.Tx in transactional mode")
			}
			if _, err := d.Tx.ExecContext(ctx, write); err != nil {
				t.Fatal(err)
			}
			settle(t, f, d, outcome.Ack())
			if _, err := d.Tx.ExecContext(ctx, write); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Errorf("the handler's transaction after settlement: %v, want ErrTransactionHeld", err)
			}

			// Retry, and Release: rolled back, then the lease cleared outside.
			for _, end := range []struct {
				id   int64
				what string
				run  func(*inbox.Delivery) error
			}{
				{8, "Retry", func(d *inbox.Delivery) error { return f.Settle(ctx, d, outcome.Retry()) }},
				{11, "Release", func(d *inbox.Delivery) error { return f.Release(ctx, d) }},
			} {
				token = nil
				fx.expectLeaseClaim(1, &token, leaseRow(end.id, 1))
				fx.expectBegin()
				fx.expectRollback()
				fx.mock.ExpectExec(fx.sql("retry")).WithArgs(end.id, sameValue{&token}).WillReturnResult(changed(1))
				if err := end.run(claimOne(t, f, end.id, 1)); err != nil {
					t.Fatalf("%s: %v", end.what, err)
				}
			}

			// A lost lease: the ack inside the transaction changes nothing, and it rolls back.
			token = nil
			fx.expectLeaseClaim(1, &token, leaseRow(9, 1))
			fx.expectBegin()
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(9), sameValue{&token}).WillReturnResult(changed(0))
			fx.expectRollback()
			if err := f.Settle(ctx, claimOne(t, f, 9, 1), outcome.Ack()); !errors.Is(err, inbox.ErrLeaseLost) {
				t.Errorf("transactional ack of a lost lease: %v, want ErrLeaseLost", err)
			}

			// A failed commit: its error, and nothing more (the row stays leased until expiry).
			// On the servers the connection is discarded, since the COMMIT's outcome is unknown;
			// on SQLite the ROLLBACK after it leaves the connection clean.
			token = nil
			fx.expectLeaseClaim(1, &token, leaseRow(10, 1))
			fx.expectBegin()
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(10), sameValue{&token}).WillReturnResult(changed(1))
			fx.expectCommit(errors.New("disk I/O error"))
			if c.db != "sqlite" {
				fx.mock.ExpectClose()
			}
			err := f.Settle(ctx, claimOne(t, f, 10, 1), outcome.Ack())
			if err == nil || !strings.Contains(err.Error(), "disk I/O error") || !strings.Contains(err.Error(), `"jobs", row 10`) {
				t.Errorf("ack whose commit failed: %v, want the commit's error naming the table and row", err)
			}
			if unknown := errors.Is(err, inbox.ErrCommitUnknown); unknown != (c.db != "sqlite") {
				t.Errorf("ack whose commit failed: %v: wraps ErrCommitUnknown %v, want it only on the servers", err, unknown)
			}

			fx.closed(t, f)
			if c.mysqlFamily() {
				// Each claim runs at READ COMMITTED whatever the dialect's level; the handler's
				// transaction at the dialect's.
				levels := fx.Levels()
				for i, l := range levels {
					want := sql.LevelReadCommitted
					if i%2 == 1 {
						want = c.level
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
	for _, c := range onMySQLFamily(leaseCases) {
		t.Run(c.name+"/commit", func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{})
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("claim")).WillReturnRows(fullShape.claimed("", leaseRow(7, 0)))
			fx.mock.ExpectExec(fx.sql("stamp(1)")).WillReturnResult(changed(1))
			fx.mock.ExpectCommit().WillReturnError(broken)
			fx.mock.ExpectClose()
			ds, err := f.Claim(context.Background(), 1)
			if len(ds) != 0 || !errors.Is(err, broken) || !errors.Is(err, inbox.ErrCommitUnknown) || !strings.Contains(err.Error(), "lease runs out") {
				t.Fatalf("Claim = %v, %v; want no rows and the COMMIT's error, its outcome unknown, saying when the rows return", ds, err)
			}
			fx.checkDiscarded(t, "the failed COMMIT")
		})
		t.Run(c.name+"/rollback", func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{})
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("claim")).WillReturnRows(fullShape.claimed("", leaseRow(7, 0)))
			fx.mock.ExpectExec(fx.sql("stamp(1)")).WillReturnError(errors.New("Error 1317 (70100): Query execution was interrupted"))
			fx.mock.ExpectRollback().WillReturnError(broken)
			fx.mock.ExpectClose()
			if ds, err := f.Claim(context.Background(), 1); len(ds) != 0 || err == nil {
				t.Fatalf("Claim = %v, %v; want no rows and the stamp's error", ds, err)
			}
			fx.checkDiscarded(t, "the failed ROLLBACK")
		})
	}
}

// TestLeaseOpenRefusals pins what Open refuses, and that it refuses before running anything it
// need not.
func TestLeaseOpenRefusals(t *testing.T) {
	ctx := context.Background()
	tbl := fullShape.table
	withoutAttempt := tbl
	withoutAttempt.Attempt = ""

	t.Run("postgres strict level, transactional", func(t *testing.T) {
		m := newRecorder(t, 1) // no expectations: nothing may run
		for _, d := range []dialect.Dialect{dialect.Postgres[isolation.RepeatableRead]{}, dialect.Postgres[isolation.Serializable]{}} {
			_, err := lease.New(d, tbl, nil).Open(ctx, m.db, inbox.Binding{Transactional: true})
			if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), string(d.Level())) || !strings.Contains(err.Error(), "isolation.ReadCommitted") {
				t.Errorf("%s: %v, want ErrDialect naming the table, the level and what to use", d.Level(), err)
			}
		}
	})

	t.Run("lease length", func(t *testing.T) {
		m := newRecorder(t, 1)
		for _, l := range []time.Duration{1500 * time.Millisecond, 500 * time.Millisecond, -time.Second} {
			_, err := lease.New(onPostgres.d, tbl, &lease.Config{Lease: l}).Open(ctx, m.db, inbox.Binding{})
			if err == nil || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "lease.Config.Lease") {
				t.Errorf("lease %v: %v, want an error naming the table and lease.Config.Lease", l, err)
			}
		}
	})

	t.Run("server too old", func(t *testing.T) {
		m := newRecorder(t, 1)
		expectVersion(m, "mysql", "5.7.44")
		if _, err := lease.New(onMySQL.d, tbl, nil).Open(ctx, m.db, inbox.Binding{}); !errors.Is(err, inbox.ErrServerTooOld) {
			t.Errorf("MySQL 5.7: %v, want ErrServerTooOld", err)
		}
	})

	for _, c := range []dbCase{onPostgres, onMySQL, onSQLite} {
		for _, unprepared := range []bool{false, true} {
			name := "missing column on " + c.name
			if unprepared {
				name += ", unprepared"
			}
			t.Run(name, func(t *testing.T) {
				m := newRecorder(t, 1)
				claim := goldenSQL(t, "lease", c.db, fullShape).of("claim")
				refusal := map[string]error{
					"postgres": errors.New(`ERROR: column "attempt" does not exist (SQLSTATE 42703)`),
					"mysql":    errors.New("Error 1054 (42S22): Unknown column 'attempt' in 'field list'"),
					"sqlite":   errors.New("SQL logic error: no such column: attempt (1)"),
				}[c.db]
				expectVersion(m, c.db, "")
				expectColumns(m, c.db, withoutAttempt, "locked_until") // a missing column is the statements' to name
				for range 2 {                                          // a refused statement is refused again: it is the schema, not the connection
					switch {
					case unprepared:
						// No Prepare: the EXPLAIN that checks the statement is refused.
						m.mock.ExpectQuery("EXPLAIN " + claim).WithArgs(explainArgs(claim)...).WillReturnError(refusal)
					case c.db == "sqlite":
						m.mock.ExpectPrepare(claim).WillBeClosed()
						m.mock.ExpectQuery("EXPLAIN " + claim).WithArgs(explainArgs(claim)...).WillReturnError(refusal)
					default:
						m.mock.ExpectPrepare(claim).WillReturnError(refusal)
					}
				}
				_, err := lease.New(c.d, tbl, nil).Open(ctx, m.db, inbox.Binding{UnpreparedStatements: unprepared})
				if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "claim statement") || !strings.Contains(err.Error(), "attempt") {
					t.Errorf("%v, want ErrSchema naming the table, the statement and the column", err)
				}
			})
		}
	}

	for _, lossy := range [][]driver.Value{
		{"datetime", "datetime", int64(0)},
		{"datetime(3)", "datetime", int64(3)},
		{"varchar(40)", "varchar", nil},
	} {
		t.Run("lease column without microseconds: "+lossy[0].(string), func(t *testing.T) {
			m := newRecorder(t, 1)
			expectVersion(m, "mysql", "")
			m.mock.ExpectQuery(schemaMySQLColumns).WithArgs("jobs").WillReturnRows(
				m.mock.NewRows([]string{"COLUMN_NAME", "COLUMN_TYPE", "DATA_TYPE", "DATETIME_PRECISION", "IS_NULLABLE", "EXTRA", "COLLATION_NAME"}).
					AddRow("id", "bigint(20)", "bigint", nil, "NO", "auto_increment", nil).
					AddRow("locked_until", lossy[0], lossy[1], lossy[2], "YES", "", nil))
			_, err := lease.New(onMySQL.d, tbl, nil).Open(ctx, m.db, inbox.Binding{})
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
	fx := newFixture(t, "lease", onSQLite, fullShape, 1, inbox.Binding{})
	expectVersion(fx.recorder, "sqlite", "3.36.0")
	fx.mock.ExpectQuery(schemaSQLiteColumns).WithArgs("jobs").WillReturnRows(fx.mock.NewRows([]string{"name", "type", "notnull"}).
		AddRow("id", "INTEGER", true).AddRow("locked_until", "DATETIME", false))
	fx.mock.ExpectQuery(schemaSQLiteStrict).WithArgs("jobs").WillReturnError(errors.New("SQL logic error: no such table: pragma_table_list (1)"))
	expectVersion(fx.recorder, "sqlite", "3.36.0")
	fx.expectPrepares()
	f := lease.New(onSQLite.d, fullShape.table, nil)
	if _, err := f.Open(context.Background(), fx.db, inbox.Binding{}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	fx.closed(t, f)
}

// TestLeaseTransactionEnded: once the database has ended the handler's transaction (a
// deadlock), its later statements are refused without reaching the server, and an Ack runs no
// settlement in it (it would run in autocommit): Settle fails with ErrTransactionEnded, rolls
// back and clears the lease, so the row is claimable again at once.
func TestLeaseTransactionEnded(t *testing.T) {
	for _, c := range onMySQLFamily(leaseTxCases) {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{Transactional: true})
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(7, 1))
			fx.expectBegin()
			fx.expectDeadlock()
			fx.expectRollback()
			fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(7), sameValue{&token}).WillReturnResult(changed(1))

			d := claimOne(t, f, 7, 1)
			checkTransactionEnded(t, d.Tx, func() error { return f.Settle(ctx, d, outcome.Ack()) })
			fx.closed(t, f)
		})
	}
}

// TestLeaseClaimRetriesConflicts: on MySQL and MariaDB a claim whose transaction meets a
// conflict (a deadlock; on a Galera node, a certification failure at COMMIT, 1213) changed
// nothing and is claimed again at once, and the row reaches the caller without an error.
func TestLeaseClaimRetriesConflicts(t *testing.T) {
	for _, c := range onMySQLFamily(leaseCases) {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{})
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("claim")).WillReturnRows(fullShape.claimed("", leaseRow(7, 0)))
			fx.mock.ExpectExec(fx.sql("stamp(1)")).WillReturnError(errDeadlock)
			fx.mock.ExpectRollback()
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("claim")).WillReturnRows(fullShape.claimed("", leaseRow(7, 0)))
			fx.mock.ExpectExec(fx.sql("stamp(1)")).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			ds, err := f.Claim(context.Background(), 1)
			if err != nil || len(ds) != 1 || ds[0].ID != 7 || ds[0].Attempt != 1 {
				t.Fatalf("Claim = %v, %v; want row 7 at attempt 1 after the conflict", ds, err)
			}
			fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(7), sqlmock.AnyArg()).WillReturnResult(changed(1)) // Close gives the row back
			fx.closed(t, f)
		})
	}
}
