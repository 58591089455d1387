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

// rowlockMock is a sqlmock database seen through connections of our own, which record the
// isolation level each transaction is begun at (sqlmock v1.5 ignores driver.TxOptions) and every
// call sqlmock refused as unexpected (the form ignores some rollback errors on purpose, so a
// refused call would otherwise go unseen).
type rowlockMock struct {
	db   *sql.DB
	mock sqlmock.Sqlmock

	mu         sync.Mutex
	levels     []sql.IsolationLevel
	unexpected []string
	execHooks  map[string]chan struct{}
	rollbacks  int
	rollbackAt map[int]chan struct{}
}

// whenRollbacks returns a channel closed once n transactions have been rolled back.
func (m *rowlockMock) whenRollbacks(n int) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rollbackAt == nil {
		m.rollbackAt = map[int]chan struct{}{}
	}
	ch := make(chan struct{})
	if m.rollbacks >= n {
		close(ch)
	} else {
		m.rollbackAt[n] = ch
	}
	return ch
}

// whenExec returns a channel closed when a statement with exactly this text reaches the driver.
func (m *rowlockMock) whenExec(query string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.execHooks == nil {
		m.execHooks = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	m.execHooks[query] = ch
	return ch
}

// newRowlockMock opens the mock; when the test ends it fails the test on an unmet expectation
// or a call sqlmock did not expect.
func newRowlockMock(t *testing.T) *rowlockMock {
	t.Helper()
	dsn := fmt.Sprintf("rowlock_%s_%d", t.Name(), time.Now().UnixNano())
	base, mock, err := sqlmock.NewWithDSN(dsn, sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	m := &rowlockMock{mock: mock}
	m.db = sql.OpenDB(rowlockConnector{drv: base.Driver(), dsn: dsn, m: m})
	t.Cleanup(func() {
		m.db.Close()
		base.Close()
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
		for _, u := range m.unexpected {
			t.Errorf("unexpected call: %s", u)
		}
	})
	return m
}

// Levels returns the isolation levels of the transactions begun so far.
func (m *rowlockMock) Levels() []sql.IsolationLevel {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sql.IsolationLevel(nil), m.levels...)
}

func (m *rowlockMock) check(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); strings.Contains(msg, "was not expected") || strings.Contains(msg, "do not match") || strings.Contains(msg, "does not equal") {
		m.mu.Lock()
		m.unexpected = append(m.unexpected, msg)
		m.mu.Unlock()
	}
	return err
}

type rowlockConnector struct {
	drv driver.Driver
	dsn string
	m   *rowlockMock
}

func (c rowlockConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return rowlockConn{conn.(rowlockMockConn), c.m}, nil
}

func (c rowlockConnector) Driver() driver.Driver { return c.drv }

// rowlockMockConn is what a sqlmock connection implements.
type rowlockMockConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
}

type rowlockConn struct {
	rowlockMockConn
	m *rowlockMock
}

func (c rowlockConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.m.mu.Lock()
	c.m.levels = append(c.m.levels, sql.IsolationLevel(opts.Isolation))
	c.m.mu.Unlock()
	tx, err := c.rowlockMockConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.m.check(err)
	}
	return rowlockTx{tx, c.m}, nil
}

func (c rowlockConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.rowlockMockConn.PrepareContext(ctx, query)
	return s, c.m.check(err)
}

func (c rowlockConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.m.mu.Lock()
	if ch, ok := c.m.execHooks[query]; ok {
		close(ch)
		delete(c.m.execHooks, query)
	}
	c.m.mu.Unlock()
	r, err := c.rowlockMockConn.ExecContext(ctx, query, args)
	return r, c.m.check(err)
}

func (c rowlockConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.rowlockMockConn.QueryContext(ctx, query, args)
	return r, c.m.check(err)
}

type rowlockTx struct {
	tx driver.Tx
	m  *rowlockMock
}

func (t rowlockTx) Commit() error { return t.m.check(t.tx.Commit()) }
func (t rowlockTx) Rollback() error {
	err := t.m.check(t.tx.Rollback())
	t.m.mu.Lock()
	t.m.rollbacks++
	if ch, ok := t.m.rollbackAt[t.m.rollbacks]; ok {
		close(ch)
	}
	t.m.mu.Unlock()
	return err
}

// rowlockTimeNear matches a bound timestamp within a few seconds of want: the form reads the
// host clock, so the test can only bracket it.
type rowlockTimeNear struct{ want time.Time }

func (a rowlockTimeNear) Match(v driver.Value) bool {
	t, ok := v.(time.Time)
	if !ok {
		return false
	}
	d := t.Sub(a.want)
	return d > -5*time.Second && d < 5*time.Second
}

// rowlockSQLState is a driver error carrying a SQLSTATE the way pgx's does.
type rowlockSQLState struct{ code string }

func (e rowlockSQLState) Error() string {
	return "ERROR: could not serialize access due to concurrent update (SQLSTATE " + e.code + ")"
}
func (e rowlockSQLState) SQLState() string { return e.code }
