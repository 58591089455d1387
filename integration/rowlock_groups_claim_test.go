package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// TestRowlockGroupsClaimStatements: on MySQL and MariaDB the row lock form's claim over groups
// reads its candidates without a lock, then locks each by its id and only then its group, all in
// one transaction. A head whose row another transaction locks (another consumer's claim, a
// settlement about to commit) is passed over by its row's refused lock, and a row that the form's
// own claims hold costs no statement at all. The claim here meets the form's own row in work, a
// head locked by another transaction, then a free head: four statements (the candidates, a
// refused row lock, the row's lock, its group's lock) in one transaction. Before, the claim locked
// the group first, and a head whose row was gone once its group was taken rolled the whole claim
// back and ran it again (in a drain of 2,000 rows over 32 groups at 8 workers, 2,673 rollbacks);
// and each of the form's own rows in work cost a refused lock, or two statements where the
// group came first.
func TestRowlockGroupsClaimStatements(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		ctx := context.Background()
		admin := b.open(t, 4)
		tbl := b.newGroupTable(t, admin)
		log := &statementLog{table: tbl.Name}
		db := countingPool(t, b, log, 4)
		f := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q"})
		// A group's first claim adds its hold row and claims again: drain one row of each first.
		b.enqueue(t, admin, tbl, groupMessages(3, 1, 0)...)
		for range 3 {
			ds := claim(t, f, 1)
			if len(ds) != 1 {
				t.Fatalf("claimed %v, want one row", deliveryIDs(ds))
			}
			settle(t, f, ds[0], outcome.Ack())
		}
		// The form's row in work (g-0), a head another transaction locks (g-1), a free head (g-2).
		ids, err := inbox.EnqueueIDs(ctx, admin, b.dialect, tbl, groupMessages(3, 1, 0)...)
		if err != nil {
			t.Fatal(err)
		}
		held := claim(t, f, 1)
		if len(held) != 1 || held[0].ID != ids[0] {
			t.Fatalf("claimed %v, want row %d of g-0", deliveryIDs(held), ids[0])
		}
		other, err := admin.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Rollback()
		var locked int64
		if err := other.QueryRowContext(ctx, "SELECT "+b.q(t, tbl.ID)+" FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(1)+" FOR UPDATE", ids[1]).Scan(&locked); err != nil {
			t.Fatal(err)
		}

		log.reset()
		ds := claim(t, f, 1)
		got := log.take()
		if len(ds) != 1 || ds[0].ID != ids[2] {
			t.Fatalf("claimed %v, want row %d of g-2 (g-0 is in work, the head of g-1 locked elsewhere)", deliveryIDs(ds), ids[2])
		}
		want := []string{"BEGIN", "read", "row lock", "row lock", "group lock"}
		if fmt.Sprint(got.kinds) != fmt.Sprint(want) {
			t.Errorf("the claim sent %v, want %v:\n%s", got.kinds, want, strings.Join(got.texts, "\n"))
		}
		settle(t, f, ds[0], outcome.Ack())
		settle(t, f, held[0], outcome.Ack())
	})
}

// statementLog records the statements a pool's connections run on one job table or on
// inbox_groups (countingPool), and the transactions they begin and end: each as its kind,
// with its text.
type statementLog struct {
	table string

	mu    sync.Mutex
	kinds []string
	texts []string
}

// statements is what a statementLog recorded.
type statements struct{ kinds, texts []string }

func (l *statementLog) reset() {
	l.mu.Lock()
	l.kinds, l.texts = nil, nil
	l.mu.Unlock()
}

// take returns what l recorded since its reset.
func (l *statementLog) take() statements {
	l.mu.Lock()
	defer l.mu.Unlock()
	return statements{kinds: l.kinds, texts: l.texts}
}

func (l *statementLog) add(kind, text string) {
	l.mu.Lock()
	l.kinds, l.texts = append(l.kinds, kind), append(l.texts, text)
	l.mu.Unlock()
}

// ran records query, which ran, where it names the table or inbox_groups: a locking read of
// inbox_groups is a group lock, one of the table a row lock, anything else a read.
func (l *statementLog) ran(query string) {
	switch {
	case strings.Contains(query, "inbox_groups") && strings.Contains(query, "FOR UPDATE") && !strings.Contains(query, l.table):
		l.add("group lock", query)
	case strings.Contains(query, l.table) && strings.Contains(query, "FOR UPDATE"):
		l.add("row lock", query)
	case strings.Contains(query, l.table) || strings.Contains(query, "inbox_groups"):
		l.add("read", query)
	}
}

// countingPool opens a pool of pool connections on the backend's database whose connections
// record in log what they run.
func countingPool(t *testing.T, b backend, log *statementLog, pool int) *sql.DB {
	t.Helper()
	dsn := b.testDSN(t)
	b.openDSN(t, dsn, 1)                  // skips or fails the test where the server does not answer
	probe, err := sql.Open(b.driver, dsn) // connects to nothing: it hands over the driver
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(countingConnector{drv: probe.Driver(), dsn: dsn, log: log})
	probe.Close()
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	t.Cleanup(func() { db.Close() })
	return db
}

// countingConnector opens connections of drv on dsn that record what they run in log.
type countingConnector struct {
	drv driver.Driver
	dsn string
	log *statementLog
}

func (c countingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return countingConn{passConn{conn}, c.log}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.drv }

// countingConn is a driver's connection that records in log the statements it runs, by text
// or prepared, and the transactions it begins and ends.
type countingConn struct {
	passConn
	log *statementLog
}

func (c countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return countingStmt{s, query, c.log}, nil
}

func (c countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.log.add("BEGIN", "")
	return countingTx{tx, c.log}, nil
}

func (c countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if err != driver.ErrSkip {
		c.log.ran(query)
	}
	return res, err
}

func (c countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	if err != driver.ErrSkip {
		c.log.ran(query)
	}
	return rows, err
}

// countingTx records the end of a transaction.
type countingTx struct {
	driver.Tx
	log *statementLog
}

func (t countingTx) Commit() error {
	t.log.add("COMMIT", "")
	return t.Tx.Commit()
}

func (t countingTx) Rollback() error {
	t.log.add("ROLLBACK", "")
	return t.Tx.Rollback()
}

// countingStmt records each run of a prepared statement.
type countingStmt struct {
	driver.Stmt
	query string
	log   *statementLog
}

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.log.ran(s.query)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.log.ran(s.query)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (s countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
