package ui_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDB is a database/sql connector whose connections answer each statement by the first of
// its answers whose key the statement contains, and record the statements they were asked:
// the page's handlers can then be tested without a server. An answer with block set waits for
// the statement's context to end and fails with its error, as a slow query cut short would.
type fakeDB struct {
	answers []answer
	pingErr error

	mu    sync.Mutex
	asked []string
}

type answer struct {
	key     string
	columns []string
	rows    [][]driver.Value
	changed int64
	block   bool
	delay   time.Duration // how long the statement takes before it answers
}

func (f *fakeDB) open(t *testing.T) *sql.DB {
	t.Helper()
	db := sql.OpenDB(f)
	t.Cleanup(func() { db.Close() })
	return db
}

// statements returns the statements asked so far that contain key.
func (f *fakeDB) statements(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, q := range f.asked {
		if strings.Contains(q, key) {
			out = append(out, q)
		}
	}
	return out
}

func (f *fakeDB) Connect(context.Context) (driver.Conn, error) { return &fakeConn{f: f}, nil }
func (f *fakeDB) Driver() driver.Driver                        { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fakeDB opens by its connector")
}

type fakeConn struct{ f *fakeDB }

func (c *fakeConn) answer(ctx context.Context, query string) (answer, error) {
	c.f.mu.Lock()
	c.f.asked = append(c.f.asked, query)
	c.f.mu.Unlock()
	for _, a := range c.f.answers {
		if !strings.Contains(query, a.key) {
			continue
		}
		if a.block {
			<-ctx.Done()
			return answer{}, ctx.Err()
		}
		time.Sleep(a.delay)
		return a, nil
	}
	return answer{}, errors.New("fakeDB: no answer for " + query)
}

func (c *fakeConn) QueryContext(ctx context.Context, query string, _ []driver.NamedValue) (driver.Rows, error) {
	a, err := c.answer(ctx, query)
	if err != nil {
		return nil, err
	}
	return &fakeRows{columns: a.columns, rows: a.rows}, nil
}

func (c *fakeConn) ExecContext(ctx context.Context, query string, _ []driver.NamedValue) (driver.Result, error) {
	a, err := c.answer(ctx, query)
	if err != nil {
		return nil, err
	}
	return driver.RowsAffected(a.changed), nil
}

func (c *fakeConn) Ping(context.Context) error { return c.f.pingErr }

func (c *fakeConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("fakeDB: statements run by their text")
}
func (c *fakeConn) Close() error              { return nil }
func (c *fakeConn) Begin() (driver.Tx, error) { return nil, errors.New("fakeDB: no transactions") }

type fakeRows struct {
	columns []string
	rows    [][]driver.Value
}

func (r *fakeRows) Columns() []string { return r.columns }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

// cookieJar keeps every cookie a server sets, whatever its path, for one test server.
type cookieJar struct {
	mu      sync.Mutex
	cookies map[string]*http.Cookie
}

func (j *cookieJar) SetCookies(_ *url.URL, cookies []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cookies == nil {
		j.cookies = map[string]*http.Cookie{}
	}
	for _, c := range cookies {
		j.cookies[c.Name] = c
	}
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*http.Cookie
	for _, c := range j.cookies {
		out = append(out, c)
	}
	return out
}
