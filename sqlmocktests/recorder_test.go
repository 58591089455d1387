package sqlmocktests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
)

// recorder is a sqlmock database seen through a connector of ours that records the isolation
// level of each transaction begun (sqlmock v1.5 ignores driver.TxOptions) and every call sqlmock
// refused (the forms drop some rollback errors on purpose, so a refusal could go unseen). It can
// also tell a test when a statement reaches the driver or when transactions have been rolled
// back.
type recorder struct {
	db   *sql.DB
	mock sqlmock.Sqlmock

	mu         sync.Mutex
	levels     []sql.IsolationLevel
	unexpected []string
	execHooks  map[string]chan struct{}
	rollbacks  int
	rollbackAt map[int]chan struct{}
}

// newRecorder opens the mock with at most maxOpen connections (0: no limit; 1 makes each
// statement prepared once, at Open, so the sequence is exact). When the test ends it fails the
// test on an unmet expectation (a prepared statement left open among them) or a call sqlmock
// did not expect.
func newRecorder(t *testing.T, maxOpen int) *recorder {
	t.Helper()
	dsn := fmt.Sprintf("recorder_%s_%d", t.Name(), time.Now().UnixNano())
	base, mock, err := sqlmock.NewWithDSN(dsn, sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	m := &recorder{mock: mock, execHooks: map[string]chan struct{}{}, rollbackAt: map[int]chan struct{}{}}
	m.db = sql.OpenDB(recorderConnector{drv: base.Driver(), dsn: dsn, m: m})
	m.db.SetMaxOpenConns(maxOpen)
	t.Cleanup(func() {
		// A transaction rolled back in the background (a settlement refused while the
		// handler's statement ran) returns its connection, and closes the statements left on
		// it, a moment after its ROLLBACK; the expectations are read once that is done.
		for deadline := time.Now().Add(5 * time.Second); m.db.Stats().InUse > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%d connections still in use when the test ended: a transaction was left open", m.db.Stats().InUse)
				break
			}
		}
		// Before the pool closes: closing its connections closes every statement left on them.
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
		m.db.Close()
		base.Close()
		for _, u := range m.unexpected {
			t.Errorf("unexpected call: %s", u)
		}
	})
	return m
}

// Levels returns the isolation levels of the transactions begun through database/sql so far.
func (m *recorder) Levels() []sql.IsolationLevel {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sql.IsolationLevel(nil), m.levels...)
}

// whenRollbacks returns a channel closed once n transactions have been rolled back.
func (m *recorder) whenRollbacks(n int) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	if m.rollbacks >= n {
		close(ch)
	} else {
		m.rollbackAt[n] = ch
	}
	return ch
}

// whenExec returns a channel closed when a statement with exactly this text is executed,
// prepared or not.
func (m *recorder) whenExec(query string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.execHooks[query] = ch
	return ch
}

// executing fires the whenExec hook of query.
func (m *recorder) executing(query string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch, ok := m.execHooks[query]; ok {
		close(ch)
		delete(m.execHooks, query)
	}
}

// check records err when it is sqlmock refusing a call, and returns it.
func (m *recorder) check(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); strings.Contains(msg, "was not expected") || strings.Contains(msg, "do not match") || strings.Contains(msg, "does not equal") || strings.Contains(msg, "could not match") {
		m.mu.Lock()
		m.unexpected = append(m.unexpected, msg)
		m.mu.Unlock()
	}
	return err
}

type recorderConnector struct {
	drv driver.Driver
	dsn string
	m   *recorder
}

func (c recorderConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return recorderConn{conn.(sqlmockConn), c.m}, nil
}

func (c recorderConnector) Driver() driver.Driver { return c.drv }

// sqlmockConn is what a sqlmock connection implements.
type sqlmockConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
}

type recorderConn struct {
	sqlmockConn
	m *recorder
}

func (c recorderConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.m.mu.Lock()
	c.m.levels = append(c.m.levels, sql.IsolationLevel(opts.Isolation))
	c.m.mu.Unlock()
	tx, err := c.sqlmockConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.m.check(err)
	}
	return recorderTx{tx, c.m}, nil
}

func (c recorderConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.sqlmockConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.m.check(err)
	}
	return recorderStmt{s, c.m, query}, nil
}

func (c recorderConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.m.executing(query)
	r, err := c.sqlmockConn.ExecContext(ctx, query, args)
	return r, c.m.check(err)
}

func (c recorderConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.sqlmockConn.QueryContext(ctx, query, args)
	return r, c.m.check(err)
}

// recorderStmt is a sqlmock prepared statement whose refusals are recorded too. sqlmock's
// statements implement only the pre-context Exec and Query, which database/sql falls back to.
type recorderStmt struct {
	driver.Stmt
	m     *recorder
	query string
}

func (s recorderStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.m.executing(s.query)
	r, err := s.Stmt.Exec(args)
	return r, s.m.check(err)
}

func (s recorderStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.Stmt.Query(args)
	return r, s.m.check(err)
}

type recorderTx struct {
	tx driver.Tx
	m  *recorder
}

func (t recorderTx) Commit() error { return t.m.check(t.tx.Commit()) }

func (t recorderTx) Rollback() error {
	err := t.m.check(t.tx.Rollback())
	t.m.mu.Lock()
	t.m.rollbacks++
	if ch, ok := t.m.rollbackAt[t.m.rollbacks]; ok {
		close(ch)
	}
	t.m.mu.Unlock()
	return err
}
