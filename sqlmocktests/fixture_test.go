package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// fixture is a form under test: the mock database it runs on, the database case and the table
// shape, the golden statements of the form over that shape on that database, the queue it is
// opened for, the plan its Open returned, and its log.
type fixture struct {
	*recorder
	form string // "lease", "rowlock" or "advisory"
	c    dbCase
	sh   shape
	st   statements
	q    inbox.Binding
	plan inbox.Plan
	logs inboxtest.Log
	// claims are the sizes of the lease claims prepared after Open on Postgres (leaseClaimSQL).
	claims map[int]bool
}

// newFixture is a fixture of form over sh on c's database on a new mock of at most maxOpen
// connections (see newRecorder); the form is to be opened for queue q, logging to the fixture's
// log where q has no logger. Where q has an attempt limit the statements a limit changes are
// their limited variants ("claim, max attempts 25" for "claim"), which the golden files hold
// for the limit 25 alone; where q has kinds, their variants of those kinds' limits ("claim,
// kinds 3, 25"), which the golden files hold for a table with a kind column.
func newFixture(t *testing.T, form string, c dbCase, sh shape, maxOpen int, q inbox.Binding) *fixture {
	t.Helper()
	st := goldenSQL(t, form, c.db, sh)
	if q.MaxAttempts > 0 {
		suffix := fmt.Sprintf(", max attempts %d", q.MaxAttempts)
		for name, sql := range st.byName {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				st.byName[base] = sql
			}
		}
	}
	if len(q.Kinds) > 0 {
		limits := make([]string, len(q.Kinds))
		for i, k := range q.Kinds {
			limits[i] = strconv.Itoa(k.MaxAttempts)
		}
		suffix := ", kinds " + strings.Join(limits, ", ")
		for name, sql := range st.byName {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				st.byName[base] = sql
			}
		}
	}
	fx := &fixture{recorder: newRecorder(t, maxOpen), form: form, c: c, sh: sh, st: st, q: q}
	if fx.q.Logger == nil {
		fx.q.Logger = fx.logs.Logger(slog.LevelWarn)
	}
	return fx
}

// sql is the form's statement named name in its golden file.
func (fx *fixture) sql(name string) string {
	fx.st.t.Helper()
	return fx.st.of(name)
}

// expectQuery expects query with exactly args: none at all where args is empty (sqlmock's
// WithArgs of nothing takes any).
func (fx *fixture) expectQuery(query string, args ...driver.Value) *sqlmock.ExpectedQuery {
	q := fx.mock.ExpectQuery(query)
	if len(args) == 0 {
		return q.WithoutArgs()
	}
	return q.WithArgs(args...)
}

// openStatements are the statements each form's Open prepares, in order, by their names in the
// golden files. A form prepares those its table has (those the file has), except that the row
// lock form's Fail deletes or stamps processed_at with the ack's statement where the table has
// no dead_at column.
var openStatements = map[string][]string{
	"lease":    {"claim", "stamp(1)", "extend", "ack", "retry", "retryAfter", "fail"},
	"rowlock":  {"claim", "ack", "retry", "retryAfter", "fail"},
	"advisory": {"keyCheck", "candidates", "lockFirst", "lock", "unlock", "take", "read", "ack", "retryAfter", "fail"},
}

// expectOpen expects what the form's Open runs: expectServer, then expectPrepares.
func (fx *fixture) expectOpen() {
	fx.expectServer()
	fx.expectPrepares()
}

// expectServer expects what the form's Open asks before it prepares: the server's version (on
// Postgres the advisory form asks twice: the dialect, then the form, whose hashtextextended
// needs 11), the Galera check of the row lock and advisory forms, and the catalog query of the
// table's columns.
func (fx *fixture) expectServer() {
	db := fx.c.db
	expectVersion(fx.recorder, db, "")
	lockCol := ""
	switch fx.form {
	case "lease":
		lockCol = fx.sh.lease
	case "advisory":
		if db == "postgres" {
			expectVersion(fx.recorder, db, "")
		}
		fallthrough
	case "rowlock":
		expectNotGalera(fx.recorder, db)
	}
	expectColumns(fx.recorder, db, fx.sh.table, lockCol)
}

// expectPrepares expects each statement the form's Open prepares (openStatements), each closed
// by the end.
func (fx *fixture) expectPrepares() { fx.expectPreparesAcking("ack") }

// expectPreparesAcking is expectPrepares for a form whose acks run the statement named ack (the
// unflushed ack, say), prepared in the place of "ack".
func (fx *fixture) expectPreparesAcking(ack string) {
	for _, name := range openStatements[fx.form] {
		if name == "ack" {
			name = ack
		}
		if !fx.st.has(name) || fx.form == "rowlock" && name == "fail" && fx.sh.table.DeadAt == "" {
			continue
		}
		fx.expectPrepare(fx.st.of(name))
	}
}

// expectPrepare expects query prepared, and closed by the end; on SQLite also compiled with
// EXPLAIN (expectExplain). Where the fixture's queue asks for unprepared statements, it expects
// the EXPLAIN alone, which checks query without preparing it.
func (fx *fixture) expectPrepare(query string) {
	if !fx.q.UnpreparedStatements {
		fx.mock.ExpectPrepare(query).WillBeClosed()
	}
	if fx.c.db == "sqlite" || fx.q.UnpreparedStatements {
		fx.expectExplain(query)
	}
}

// placeholder is a statement parameter: a ?, or Postgres's $n; with what precedes it.
var placeholder = regexp.MustCompile(`(LIMIT )?(\?|\$[0-9]+)`)

// expectExplain expects EXPLAIN of query (explainArgs).
func (fx *fixture) expectExplain(query string) {
	fx.expectQuery("EXPLAIN "+query, explainArgs(query)...).WillReturnRows(sqlmock.NewRows([]string{"plan"}))
}

// explainArgs are the arguments of the EXPLAIN that checks query: one per parameter, NULL, or 1
// for a LIMIT's (MySQL and MariaDB take no NULL there).
func explainArgs(query string) []driver.Value {
	var args []driver.Value
	for _, m := range placeholder.FindAllStringSubmatch(query, -1) {
		n := len(args) + 1
		if fmt.Sscanf(m[2], "$%d", &n); n > len(args) {
			args = append(args, make([]driver.Value, n-len(args))...)
		}
		if m[1] != "" {
			args[n-1] = int64(1)
		}
	}
	return args
}

// open expects f's Open (expectOpen) and opens f for the fixture's queue, keeping its plan.
func (fx *fixture) open(t *testing.T, f inbox.Form) {
	t.Helper()
	fx.expectOpen()
	fx.opened(t, f)
}

// opened opens f for the fixture's queue, keeping its plan, where the caller expected its Open.
func (fx *fixture) opened(t *testing.T, f inbox.Form) {
	t.Helper()
	plan, err := f.Open(context.Background(), fx.db, fx.q)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	fx.plan = plan
}

// noWarnings fails t where the form logged a warning.
func (fx *fixture) noWarnings(t *testing.T) {
	t.Helper()
	if w := fx.logs.String(); w != "" {
		t.Fatalf("the form warned:\n%s", w)
	}
}

// warned reports whether the form logged a warning holding every one of want.
func (fx *fixture) warned(want ...string) bool {
	w := fx.logs.String()
	for _, s := range append(want, "level=WARN") {
		if !strings.Contains(w, s) {
			return false
		}
	}
	return true
}

// expectBegin, expectCommit and expectRollback expect a transaction of the form's: on SQLite
// statements on its pinned connection (BEGIN IMMEDIATE, whatever the dialect's mode, for a
// claim; the tests' transactional cases declare that mode), database/sql's elsewhere.
func (fx *fixture) expectBegin() {
	if fx.c.db == "sqlite" {
		fx.mock.ExpectExec("BEGIN IMMEDIATE").WillReturnResult(changed(0))
		return
	}
	fx.mock.ExpectBegin()
}

// expectCommit expects a COMMIT that fails with err, or succeeds where err is nil. On SQLite a
// failed COMMIT leaves the transaction open, and a ROLLBACK follows.
func (fx *fixture) expectCommit(err error) {
	switch {
	case fx.c.db != "sqlite":
		fx.mock.ExpectCommit().WillReturnError(err)
	case err == nil:
		fx.mock.ExpectExec("COMMIT").WillReturnResult(changed(0))
	default:
		fx.mock.ExpectExec("COMMIT").WillReturnError(err)
		fx.mock.ExpectExec("ROLLBACK").WillReturnResult(changed(0))
	}
}

func (fx *fixture) expectRollback() {
	if fx.c.db == "sqlite" {
		fx.mock.ExpectExec("ROLLBACK").WillReturnResult(changed(0))
		return
	}
	fx.mock.ExpectRollback()
}

// checkDiscarded checks at once that every expectation was met, the mock's ExpectClose among
// them: the form closed the connection that what left in doubt, rather than return it to the
// pool; and, where warning is given, that the form warned so, in those words.
func (fx *fixture) checkDiscarded(t *testing.T, what string, warning ...string) {
	t.Helper()
	if err := fx.mock.ExpectationsWereMet(); err != nil {
		t.Fatalf("the connection of %s was not discarded: %v", what, err)
	}
	if len(warning) > 0 && !fx.warned(warning...) {
		t.Fatalf("logs %q: want a warning that the connection was closed", fx.logs.String())
	}
}

// claimed runs claim, a form's Claim or ClaimBatch, for up to max rows, and stops the test where
// it fails.
func claimed(t *testing.T, claim func(context.Context, int) ([]*inbox.Delivery, error), max int) []*inbox.Delivery {
	t.Helper()
	ds, err := claim(context.Background(), max)
	if err != nil {
		t.Fatalf("claim (max %d): %v", max, err)
	}
	return ds
}

// claimBatch claims a batch of up to max rows on f, and stops the test unless it holds want.
func claimBatch(t *testing.T, f inbox.BatchForm, max, want int) []*inbox.Delivery {
	t.Helper()
	ds := claimed(t, f.ClaimBatch, max)
	if len(ds) != want {
		t.Fatalf("ClaimBatch(%d) returned %d deliveries, want %d", max, len(ds), want)
	}
	return ds
}

// settle settles d by o on f, and stops the test where the settlement fails.
func settle(t *testing.T, f inbox.Form, d *inbox.Delivery, o outcome.Outcome) {
	t.Helper()
	if err := f.Settle(context.Background(), d, o); err != nil {
		t.Fatalf("Settle(%s): %v", o, err)
	}
}

// settleBatch settles ds by outcomes, one each, on f, and stops the test where the settlement
// fails.
func settleBatch(t *testing.T, f inbox.BatchForm, ds []*inbox.Delivery, outcomes ...outcome.Outcome) {
	t.Helper()
	if err := f.SettleBatch(context.Background(), ds, outcomes); err != nil {
		t.Fatalf("SettleBatch(%v): %v", outcomes, err)
	}
}

// extend extends f's hold on d, and stops the test where the extension fails.
func extend(t *testing.T, f inbox.Form, d *inbox.Delivery) {
	t.Helper()
	if err := f.Extend(context.Background(), d); err != nil {
		t.Fatalf("Extend: %v", err)
	}
}

// checkClosed closes f and checks that it then refuses, with ErrClosed and running nothing, d's
// settlement and release and a claim.
func checkClosed(t *testing.T, f inbox.Form, d *inbox.Delivery) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Settle after Close: %v, want ErrClosed", err)
	}
	if err := f.Release(ctx, d); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Release after Close: %v, want ErrClosed", err)
	}
	if _, err := f.Claim(ctx, 1); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Claim after Close: %v, want ErrClosed", err)
	}
}

// handlerDeadlock is the handler's statement the tests' database fails with a deadlock.
const handlerDeadlock = "UPDATE accounts SET balance = 0"

// expectDeadlock expects handlerDeadlock, failed with a deadlock, which ended its transaction:
// the MariaDB dialect then asks whether the transaction stands, and hears it does not.
func (fx *fixture) expectDeadlock() {
	fx.mock.ExpectExec(handlerDeadlock).WillReturnError(errDeadlock)
	if fx.c.db == "mariadb" {
		expectInTransaction(fx.recorder, 0)
	}
}

// checkTransactionEnded runs handlerDeadlock on tx (expectDeadlock), which must fail with the
// deadlock; then another statement, which tx must refuse with ErrTransactionEnded without
// running it; then settle, an Ack, which must fail with ErrTransactionEnded too (an Ack would
// otherwise run in autocommit).
func checkTransactionEnded(t *testing.T, tx inbox.Tx, settle func() error) {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.ExecContext(ctx, handlerDeadlock); !errors.Is(err, errDeadlock) {
		t.Fatalf("the failing statement: %v, want the deadlock", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO audit VALUES (7)"); !errors.Is(err, inbox.ErrTransactionEnded) {
		t.Errorf("the statement after the deadlock: %v, want ErrTransactionEnded", err)
	}
	if err := settle(); !errors.Is(err, inbox.ErrTransactionEnded) {
		t.Errorf("Settle = %v, want ErrTransactionEnded", err)
	}
}

// checkSettleWhileHeld runs a statement of the handler's on tx, which the mock delays, and
// settles with settle while it runs: settle must fail with ErrTransactionHeld at once, without
// waiting for the statement, and the transaction must be rolled back once the statement ends.
func (fx *fixture) checkSettleWhileHeld(t *testing.T, tx inbox.Tx, settle func() error) {
	t.Helper()
	const stmt = "UPDATE accounts SET balance = 1"
	fx.mock.ExpectExec(stmt).WillDelayFor(300 * time.Millisecond).WillReturnResult(changed(1))
	fx.mock.ExpectRollback()
	started := fx.whenExec(stmt)
	leftBehind := make(chan error, 1)
	go func() {
		_, err := tx.ExecContext(context.Background(), stmt)
		leftBehind <- err
	}()
	<-started
	rolledBack := fx.whenRollbacks(1)
	if err := settle(); !errors.Is(err, inbox.ErrTransactionHeld) {
		t.Fatalf("settlement = %v; want ErrTransactionHeld", err)
	}
	select {
	case <-leftBehind:
		t.Error("the settlement returned only after the handler's statement")
	default:
	}
	if err := <-leftBehind; err != nil {
		t.Fatalf("the handler's statement: %v", err)
	}
	<-rolledBack
}

// openLease opens the lease form over sh on c's database (see newFixture and open).
func openLease(t *testing.T, c dbCase, sh shape, maxOpen int, q inbox.Binding) (*fixture, *lease.Form[dialect.Dialect]) {
	t.Helper()
	fx := newFixture(t, "lease", c, sh, maxOpen, q)
	f := lease.New(c.d, sh.table, nil)
	fx.open(t, f)
	return fx, f
}

// openRowlock opens the row lock form over sh on c's database (see newFixture and open), and
// checks its plan (checkRowlockPlan).
func openRowlock(t *testing.T, c dbCase, sh shape, maxOpen int, q inbox.Binding) (*fixture, *rowlock.Form[rowlock.Dialect]) {
	t.Helper()
	fx := newFixture(t, "rowlock", c, sh, maxOpen, q)
	f := c.rowlockForm(sh.table)
	fx.open(t, f)
	checkRowlockPlan(t, fx.plan)
	return fx, f
}

// checkRowlockPlan checks a row lock plan of table jobs: a held connection, no extension,
// parallel claims, a search for unclaimable rows and no settle-and-claim.
func checkRowlockPlan(t *testing.T, p inbox.Plan) {
	t.Helper()
	if p.Table != "jobs" || !p.HoldsConnection || p.ExtendEvery != 0 || p.SerialClaims || p.SettleAndClaim != nil || p.FindUnclaimable == nil {
		t.Fatalf("plan = %+v; want table jobs, holding a connection, no extension, parallel claims, a search for unclaimable rows and no settle-and-claim", p)
	}
}

// openAdvisory opens the advisory form over sh, with sh's key, on c's database on a pool of two
// connections (a claim of two rows pins both; see newFixture and open), checks its plan (the
// table, a held connection, no extension), and closes it when the test ends.
func openAdvisory(t *testing.T, c dbCase, sh shape, q inbox.Binding) (*fixture, *advisory.Form[advisory.Dialect]) {
	t.Helper()
	fx := newFixture(t, "advisory", c, sh, 2, q)
	f := c.advisoryForm(sh.table, sh.key)
	fx.open(t, f)
	t.Cleanup(func() { f.Close() })
	if p := fx.plan; !p.HoldsConnection || p.ExtendEvery != 0 || p.Table != "jobs" {
		t.Fatalf("plan %+v: want the table, a held connection and no extension", p)
	}
	return fx, f
}

// closed closes f, the form fx opened, and checks that every statement fx expected ran.
func (fx *fixture) closed(t *testing.T, f interface{ Close() error }) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fx.mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}
