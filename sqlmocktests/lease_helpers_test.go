package sqlmocktests

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox/dialect"
)

// leaseMock is a sqlmock database of one connection (so that each statement is prepared once,
// at Open, and the sequence is exact), seen through a connector of ours that records the
// isolation level of each transaction begun (sqlmock v1.5 ignores it) and every call sqlmock
// refused (the form drops some rollback errors on purpose, so a refusal could go unseen).
type leaseMock struct {
	db   *sql.DB
	mock sqlmock.Sqlmock

	mu         sync.Mutex
	levels     []sql.IsolationLevel
	unexpected []string
}

// newLeaseMock opens the mock; when the test ends it fails the test on an unmet expectation
// (a prepared statement left open among them) or a call sqlmock did not expect.
func newLeaseMock(t *testing.T) *leaseMock {
	t.Helper()
	dsn := fmt.Sprintf("lease_%s_%d", t.Name(), time.Now().UnixNano())
	base, mock, err := sqlmock.NewWithDSN(dsn, sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	m := &leaseMock{mock: mock}
	m.db = sql.OpenDB(leaseConnector{drv: base.Driver(), dsn: dsn, m: m})
	m.db.SetMaxOpenConns(1)
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

// Levels returns the isolation levels of the transactions begun through database/sql so far.
func (m *leaseMock) Levels() []sql.IsolationLevel {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sql.IsolationLevel(nil), m.levels...)
}

func (m *leaseMock) check(err error) error {
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

type leaseConnector struct {
	drv driver.Driver
	dsn string
	m   *leaseMock
}

func (c leaseConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return leaseConn{conn.(leaseMockConn), c.m}, nil
}

func (c leaseConnector) Driver() driver.Driver { return c.drv }

// leaseMockConn is what a sqlmock connection implements.
type leaseMockConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
}

type leaseConn struct {
	leaseMockConn
	m *leaseMock
}

func (c leaseConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.m.mu.Lock()
	c.m.levels = append(c.m.levels, sql.IsolationLevel(opts.Isolation))
	c.m.mu.Unlock()
	tx, err := c.leaseMockConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.m.check(err)
	}
	return leaseTx{tx, c.m}, nil
}

func (c leaseConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.leaseMockConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.m.check(err)
	}
	return leaseStmt{s, c.m}, nil
}

func (c leaseConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.leaseMockConn.ExecContext(ctx, query, args)
	return r, c.m.check(err)
}

func (c leaseConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.leaseMockConn.QueryContext(ctx, query, args)
	return r, c.m.check(err)
}

// leaseStmt is a sqlmock prepared statement whose refusals are recorded too. sqlmock's
// statements implement only the pre-context Exec and Query, which database/sql falls back to.
type leaseStmt struct {
	driver.Stmt
	m *leaseMock
}

func (s leaseStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.Stmt.Exec(args)
	return r, s.m.check(err)
}

func (s leaseStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.Stmt.Query(args)
	return r, s.m.check(err)
}

type leaseTx struct {
	tx driver.Tx
	m  *leaseMock
}

func (t leaseTx) Commit() error   { return t.m.check(t.tx.Commit()) }
func (t leaseTx) Rollback() error { return t.m.check(t.tx.Rollback()) }

// leaseTime matches a bound timestamp within a few seconds of want (the form reads the host
// clock, so a test can only bracket it): a time.Time, or on SQLite the fixed-width text. It
// records the value it matched in into, when into is set, for leaseSame to compare later
// arguments with.
type leaseTime struct {
	want time.Time
	into *driver.Value
}

func (a leaseTime) Match(v driver.Value) bool {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case string:
		var err error
		if t, err = time.Parse(dialect.SQLiteTimeLayout, v); err != nil {
			return false
		}
	default:
		return false
	}
	if d := t.Sub(a.want); d <= -5*time.Second || d >= 5*time.Second {
		return false
	}
	if a.into != nil {
		*a.into = v
	}
	return true
}

// leaseSame matches exactly the value an earlier leaseTime recorded: the token the form holds.
type leaseSame struct{ v *driver.Value }

func (a leaseSame) Match(v driver.Value) bool {
	if t, ok := v.(time.Time); ok {
		want, ok := (*a.v).(time.Time)
		return ok && t.Equal(want)
	}
	return *a.v != nil && v == *a.v
}

// leaseLog is a logger whose text a test can read.
type leaseLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *leaseLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *leaseLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *leaseLog) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
