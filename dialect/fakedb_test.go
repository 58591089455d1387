package dialect_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
)

// fakeDB is a database/sql connector that records what each connection is asked, answers
// single-value queries from a table and fails the statements it is told to, so that what a
// dialect sends can be checked without a server.
type fakeDB struct {
	answers    map[string]string // query -> the one value it returns
	fail       map[string]error  // statement (or "commit", "rollback") -> the error it returns
	connectErr error

	mu     sync.Mutex
	conns  int
	events []string
}

// open returns a pool of at most one connection over f, closed when the test ends.
func (f *fakeDB) open(t *testing.T) *sql.DB {
	t.Helper()
	db := sql.OpenDB(f)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// log returns the events so far, each "connN: what".
func (f *fakeDB) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// begin opens a pool over f and begins a transaction of d on it, ending the test if d cannot.
func (f *fakeDB) begin(t *testing.T, ctx context.Context, d dialect.Dialect) (*sql.DB, dialect.Tx) {
	t.Helper()
	db := f.open(t)
	tx, err := d.Begin(ctx, db)
	if err != nil {
		t.Fatalf("%s at %s: Begin: %v", d.Name(), d.Level(), err)
	}
	return db, tx
}

// wantAsked checks that f's connections were asked want, in this order and nothing more.
func (f *fakeDB) wantAsked(t *testing.T, want []string) {
	t.Helper()
	if got := f.log(); !slices.Equal(got, want) {
		t.Errorf("the connections were asked\n%q\nwant\n%q", got, want)
	}
}

func (f *fakeDB) record(conn int, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("conn%d: ", conn)+fmt.Sprintf(format, args...))
}

func (f *fakeDB) Connect(context.Context) (driver.Conn, error) {
	if f.connectErr != nil {
		return nil, f.connectErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns++
	return &fakeConn{db: f, id: f.conns}, nil
}

func (f *fakeDB) Driver() driver.Driver { return f }

func (f *fakeDB) Open(string) (driver.Conn, error) { return f.Connect(context.Background()) }

type fakeConn struct {
	db *fakeDB
	id int
}

// ResetSession and IsValid make the connection one that database/sql keeps after a rollback
// the transaction's context forced, as it keeps the real drivers' (pgx, go-sql-driver/mysql).
func (c *fakeConn) ResetSession(context.Context) error { return nil }
func (c *fakeConn) IsValid() bool                      { return true }

func (c *fakeConn) Prepare(query string) (driver.Stmt, error) {
	c.db.record(c.id, "prepare %s", query)
	return fakeStmt{c, query}, nil
}

// fakeStmt is a statement prepared on a connection: it runs as a statement by text does, and is
// recorded as "stmt exec …", "stmt query …".
type fakeStmt struct {
	c     *fakeConn
	query string
}

func (s fakeStmt) Close() error  { return nil }
func (s fakeStmt) NumInput() int { return -1 }

func (s fakeStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.c.db.record(s.c.id, "stmt exec %s", s.query)
	return driver.RowsAffected(0), s.c.db.fail[s.query]
}

func (s fakeStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.c.db.record(s.c.id, "stmt query %s", s.query)
	if err := s.c.db.fail[s.query]; err != nil {
		return nil, err
	}
	return dialect.ValueRows(s.c.db.answers[s.query]), nil
}

func (c *fakeConn) Close() error {
	c.db.record(c.id, "close")
	return nil
}

func (c *fakeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *fakeConn) BeginTx(_ context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.db.record(c.id, "begin at %s", sql.IsolationLevel(opts.Isolation))
	return fakeTx{c}, nil
}

func (c *fakeConn) ExecContext(_ context.Context, query string, _ []driver.NamedValue) (driver.Result, error) {
	c.db.record(c.id, "exec %s", query)
	if err := c.db.fail[query]; err != nil {
		return nil, err
	}
	return driver.RowsAffected(0), nil
}

func (c *fakeConn) QueryContext(_ context.Context, query string, _ []driver.NamedValue) (driver.Rows, error) {
	c.db.record(c.id, "query %s", query)
	if err := c.db.fail[query]; err != nil {
		return nil, err
	}
	v, ok := c.db.answers[query]
	if !ok {
		return nil, fmt.Errorf("fakeDB: no answer to %q", query)
	}
	return dialect.ValueRows(v), nil
}

type fakeTx struct{ c *fakeConn }

func (tx fakeTx) Commit() error {
	tx.c.db.record(tx.c.id, "commit")
	return tx.c.db.fail["commit"]
}

func (tx fakeTx) Rollback() error {
	tx.c.db.record(tx.c.id, "rollback")
	return tx.c.db.fail["rollback"]
}
