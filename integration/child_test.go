package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// This file holds the instruments the crash matrix and the fault tests share: a pool whose
// every statement passes through a hook (hookedDB), and a form wrapper (phasedForm) that tells
// the hook which of the form's calls a statement belongs to. With the two, a test can stop a
// child process, or kill a server connection, at an exact point: before or after the n-th
// statement of a claim, before the commit of a settlement, and so on.

// phase says which call of the form a statement runs for; phasedForm puts it in the context
// the form passes down to database/sql, which hands it to the driver.
type phase struct {
	name string // "claim", "settle", "release", "extend", "open"
	id   int64  // the delivery settled or released; 0 for a claim
}

type phaseKey struct{}

// phaseOf is ctx's phase; zero outside the form's calls.
func phaseOf(ctx context.Context) phase {
	p, _ := ctx.Value(phaseKey{}).(phase)
	return p
}

// phasedForm wraps a form, marking the context of each call with its phase, and reports its
// settlements.
type phasedForm struct {
	inner inbox.Form
	// settled, when set, hears of every settlement that returned nil.
	settled func(d *inbox.Delivery, o outcome.Outcome)
}

func (f *phasedForm) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	return f.inner.Open(context.WithValue(ctx, phaseKey{}, phase{name: "open"}), db, q)
}

func (f *phasedForm) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	return f.inner.Claim(context.WithValue(ctx, phaseKey{}, phase{name: "claim"}), max)
}

func (f *phasedForm) Extend(ctx context.Context, d *inbox.Delivery) error {
	return f.inner.Extend(context.WithValue(ctx, phaseKey{}, phase{"extend", d.ID}), d)
}

func (f *phasedForm) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	err := f.inner.Settle(context.WithValue(ctx, phaseKey{}, phase{"settle", d.ID}), d, o)
	if err == nil && f.settled != nil {
		f.settled(d, o)
	}
	return err
}

func (f *phasedForm) Release(ctx context.Context, d *inbox.Delivery) error {
	return f.inner.Release(context.WithValue(ctx, phaseKey{}, phase{"release", d.ID}), d)
}

func (f *phasedForm) Close() error { return f.inner.Close() }

// hookEvent is one statement (or begin, commit, rollback) of a hooked pool, seen before it
// reaches the server or after the server answered, before database/sql gets the answer.
type hookEvent struct {
	phase phase  // the form's call; zero outside one (the handler's own statements, say)
	what  string // "prepare", "begin", "query", "exec", "commit", "rollback", "reuse"
	query string
	after bool
	conn  *hookConn
}

// hooks is a hooked pool's registry of live connections and its hook.
type hooks struct {
	backend string
	on      func(hookEvent) // may block, to stop the process right there

	mu      sync.Mutex
	conns   map[*hookConn]bool
	opened  []int64          // the session of every connection the pool ever opened, closed or not
	refuses map[string]error // "commit" or "rollback": the next one fails with this error
}

// refuseNext makes the pool's next COMMIT or ROLLBACK (what: "commit", "rollback") fail with
// err without reaching the server, as a driver's does when it cannot send it: the server's
// transaction stays open, and the driver still takes its connection for a good one.
func (h *hooks) refuseNext(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuses == nil {
		h.refuses = map[string]error{}
	}
	h.refuses[what] = err
}

// refused returns the error refuseNext armed for what, once.
func (h *hooks) refused(what string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.refuses[what]
	delete(h.refuses, what)
	return err
}

// sessions returns the server session ids (Postgres backend pids, MySQL connection ids) of the
// pool's open connections.
func (h *hooks) sessions() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []int64
	for c := range h.conns {
		if c.session != 0 {
			ids = append(ids, c.session)
		}
	}
	return ids
}

// everOpened returns the server session of every connection the pool ever opened, those it
// has closed since among them: a session the pool closed on its side but the server kept, with
// a transaction open, would hold its rows as long as one the pool keeps.
func (h *hooks) everOpened() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.opened)
}

// sever ends the session of every open connection of the pool, as a server killing its
// sessions would, where there is no server to kill them (SQLite): each connection rolls back
// what it has open at its next call and fails that call and every later one with errSevered, so
// that database/sql discards it. It returns the number of connections severed.
func (h *hooks) sever() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for c := range h.conns {
		c.mu.Lock()
		if c.severed == alive {
			c.severed = severing
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// errSevered is what a severed connection answers, like a socket the server closed: it is not
// driver.ErrBadConn, which would tell database/sql that nothing was sent.
var errSevered = errors.New("the connection was severed (the test ended its session)")

// A connection's life under sever.
const (
	alive    = iota
	severing // sever marked it; its next call ends the session
	severed  // its session ended; every call fails
)

// hookedDB opens a pool on the backend's driver whose statements pass through on. dsn overrides
// the backend's (SQLite files are per test).
func hookedDB(b backend, dsn string, on func(hookEvent)) (*sql.DB, *hooks, error) {
	plain, err := sql.Open(b.driver, dsn)
	if err != nil {
		return nil, nil, err
	}
	drv := plain.Driver()
	plain.Close()
	var inner driver.Connector = dsnConnector{drv, dsn}
	if dc, ok := drv.(driver.DriverContext); ok {
		if inner, err = dc.OpenConnector(dsn); err != nil {
			return nil, nil, err
		}
	}
	h := &hooks{backend: b.name, on: on, conns: map[*hookConn]bool{}}
	return sql.OpenDB(hookConnector{inner, h}), h, nil
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type hookConnector struct {
	inner driver.Connector
	h     *hooks
}

func (c hookConnector) Driver() driver.Driver { return c.inner.Driver() }

func (c hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	hc := &hookConn{inner: conn, h: c.h}
	var query string
	switch c.h.backend {
	case "postgres":
		query = "SELECT pg_backend_pid()"
	case "mysql", "mariadb":
		query = "SELECT CONNECTION_ID()"
	}
	if query != "" {
		if hc.session, err = queryInt(ctx, conn, query); err != nil {
			conn.Close()
			return nil, fmt.Errorf("reading the session id: %w", err)
		}
	}
	c.h.mu.Lock()
	c.h.conns[hc] = true
	if hc.session != 0 {
		c.h.opened = append(c.h.opened, hc.session)
	}
	c.h.mu.Unlock()
	return hc, nil
}

// queryInt runs query, which answers one integer, on a raw driver connection.
func queryInt(ctx context.Context, conn driver.Conn, query string) (int64, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return 0, errors.New("the driver's connection cannot run a query directly")
	}
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return 0, err
	}
	switch n := v[0].(type) {
	case int64:
		return n, nil
	case uint64:
		return int64(n), nil
	case []byte:
		return strconv.ParseInt(string(n), 10, 64)
	}
	return 0, fmt.Errorf("an integer of type %T", v[0])
}

// hookConn is one connection of a hooked pool. It passes every optional interface of the
// driver's connection through, so that database/sql treats it as it would the driver's own.
type hookConn struct {
	inner   driver.Conn
	h       *hooks
	session int64

	mu      sync.Mutex
	phase   phase // of the last statement that carried one: commits and rollbacks have no context
	severed int   // alive, severing or severed
}

// dead fails a call of a severed connection. The first call after sever ends the session as a
// server would, rolling back what it had open (database/sql serialises the calls of one
// connection, so the rollback runs alone on it).
func (c *hookConn) dead() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.severed {
	case alive:
		return nil
	case severing:
		if e, ok := c.inner.(driver.ExecerContext); ok {
			e.ExecContext(context.Background(), "ROLLBACK", nil) // nothing open: an error, ignored
		}
		c.severed = severed
	}
	return errSevered
}

// enter records ctx's phase as the connection's current one and returns it.
func (c *hookConn) enter(ctx context.Context) phase {
	p := phaseOf(ctx)
	c.mu.Lock()
	c.phase = p
	c.mu.Unlock()
	return p
}

// current is the phase of the connection's last statement: a commit or rollback belongs to it.
func (c *hookConn) current() phase {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase
}

func (c *hookConn) event(p phase, what, query string, after bool) {
	if c.h.on != nil {
		c.h.on(hookEvent{phase: p, what: what, query: query, after: after, conn: c})
	}
}

// hooked runs do, the call what ("begin", "exec", "query") of query on c in ctx's phase: it fails
// at once on a severed connection, and the pool's hook hears of it before do and, where do
// succeeds, after.
func hooked[R any](c *hookConn, ctx context.Context, what, query string, do func() (R, error)) (R, error) {
	if err := c.dead(); err != nil {
		var none R
		return none, err
	}
	p := c.enter(ctx)
	c.event(p, what, query, false)
	r, err := do()
	if err == nil {
		c.event(p, what, query, true)
	}
	return r, err
}

func (c *hookConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *hookConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.dead(); err != nil {
		return nil, err
	}
	c.event(c.enter(ctx), "prepare", query, false)
	var (
		s   driver.Stmt
		err error
	)
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, query)
	} else {
		s, err = c.inner.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &hookStmt{inner: s, conn: c, query: query}, nil
}

func (c *hookConn) Close() error {
	c.h.mu.Lock()
	delete(c.h.conns, c)
	c.h.mu.Unlock()
	return c.inner.Close()
}

func (c *hookConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *hookConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := hooked(c, ctx, "begin", "", func() (driver.Tx, error) {
		if b, ok := c.inner.(driver.ConnBeginTx); ok {
			return b.BeginTx(ctx, opts)
		}
		//lint:ignore SA1019 the fallback database/sql itself takes for an old driver
		return c.inner.Begin()
	})
	if err != nil {
		return nil, err
	}
	return &hookTx{inner: tx, conn: c}, nil
}

func (c *hookConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip // database/sql prepares the statement instead
	}
	return hooked(c, ctx, "exec", query, func() (driver.Result, error) { return e.ExecContext(ctx, query, args) })
}

func (c *hookConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return hooked(c, ctx, "query", query, func() (driver.Rows, error) { return q.QueryContext(ctx, query, args) })
}

func (c *hookConn) Ping(ctx context.Context) error {
	if err := c.dead(); err != nil {
		return driver.ErrBadConn
	}
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// ResetSession is database/sql's call before it hands a pooled connection to its next user;
// where the connection passes, the hook hears of it ("reuse"), outside any phase.
func (c *hookConn) ResetSession(ctx context.Context) error {
	if err := c.dead(); err != nil {
		return driver.ErrBadConn // as a driver's liveness check finds a closed socket
	}
	if r, ok := c.inner.(driver.SessionResetter); ok {
		if err := r.ResetSession(ctx); err != nil {
			return err
		}
	}
	c.event(phase{}, "reuse", "", false)
	return nil
}

func (c *hookConn) IsValid() bool {
	c.mu.Lock()
	severed := c.severed != alive
	c.mu.Unlock()
	if severed {
		return false
	}
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *hookConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type hookTx struct {
	inner driver.Tx
	conn  *hookConn
}

// end fails the transaction's end, what ("commit" or "rollback"), at once on a severed
// connection, or where the pool was told to refuse the next one.
func (t *hookTx) end(what string) error {
	if err := t.conn.dead(); err != nil {
		return err
	}
	return t.conn.h.refused(what)
}

func (t *hookTx) Commit() error {
	if err := t.end("commit"); err != nil {
		return err
	}
	p := t.conn.current()
	t.conn.event(p, "commit", "", false)
	err := t.inner.Commit()
	if err == nil {
		t.conn.event(p, "commit", "", true)
	}
	return err
}

func (t *hookTx) Rollback() error {
	if err := t.end("rollback"); err != nil {
		return err
	}
	p := t.conn.current()
	t.conn.event(p, "rollback", "", false)
	err := t.inner.Rollback()
	if err == nil {
		t.conn.event(p, "rollback", "", true)
	}
	return err
}

type hookStmt struct {
	inner driver.Stmt
	conn  *hookConn
	query string
}

func (s *hookStmt) Close() error  { return s.inner.Close() }
func (s *hookStmt) NumInput() int { return s.inner.NumInput() }

func (s *hookStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *hookStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *hookStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return hooked(s.conn, ctx, "exec", s.query, func() (driver.Result, error) {
		if e, ok := s.inner.(driver.StmtExecContext); ok {
			return e.ExecContext(ctx, args)
		}
		//lint:ignore SA1019 the fallback database/sql itself takes for an old driver
		return s.inner.Exec(values(args))
	})
}

func (s *hookStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return hooked(s.conn, ctx, "query", s.query, func() (driver.Rows, error) {
		if q, ok := s.inner.(driver.StmtQueryContext); ok {
			return q.QueryContext(ctx, args)
		}
		//lint:ignore SA1019 the fallback database/sql itself takes for an old driver
		return s.inner.Query(values(args))
	})
}

func (s *hookStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

func values(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

// lineWriter serialises lines to w: each line is one write, so lines from several goroutines
// (and, through a pipe, several processes) never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	line := fmt.Sprintf(format+"\n", args...)
	l.mu.Lock()
	io.WriteString(l.w, line)
	l.mu.Unlock()
}

// The crash matrix's child: the test binary run again with crashSpecEnv set becomes one
// consumer of a cell, which stops dead at the point its spec names and says so on stdout, so
// that the parent can SIGKILL it right there. Its stdout carries one line per event:
//
//	ready                         the consumer is about to run
//	handle <id> <attempt> <ns>    a handler started (ns: Unix nanoseconds)
//	settled <id>                  a settlement returned nil
//	at <point> <what> <id>        stopped at the kill point; waiting for SIGKILL
const crashSpecEnv = "INBOX_CRASH_SPEC"

// crashSpec is what a crash child is to do, passed as JSON in crashSpecEnv.
type crashSpec struct {
	Backend       string
	Form          string
	DSN           string
	Table         string
	Side          string
	Transactional bool
	// Point is where the child stops: "claim" (a statement, begin or commit of a claim),
	// "handler" (inside the handler), "written" (after the handler's side-effect write, before
	// it returns) or "settle" (a statement or commit of a settlement).
	Point string
	// Nth: the child stops at the Nth event of its point.
	Nth int
	// After: for claim and settle, stop once the server has answered the statement (it ran,
	// and committed where it commits by itself), before the form sees the answer; otherwise
	// stop before it is sent.
	After bool
}

// crashChild runs the child's consumer until it stops at its point; the parent kills it there.
// It exits on its own after a minute, should the parent die first.
func crashChild(t *testing.T) {
	var spec crashSpec
	if err := json.Unmarshal([]byte(os.Getenv(crashSpecEnv)), &spec); err != nil {
		t.Fatalf("crash child: %v", err)
	}
	out := &lineWriter{w: os.Stdout}
	stop := func(what string, id int64) {
		out.printf("at %s %s %d", spec.Point, what, id)
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	var events atomic.Int64
	reached := func() bool { return events.Add(1) == int64(spec.Nth) }
	on := func(ev hookEvent) {
		if ev.phase.name == spec.Point && ev.after == spec.After && ev.what != "rollback" && reached() {
			stop(ev.what, ev.phase.id)
		}
	}
	c := cell{b: backendNamed(spec.Backend, spec.DSN), form: spec.Form}
	db, _, err := hookedDB(c.b, spec.DSN, on)
	if err != nil {
		t.Fatalf("crash child: %v", err)
	}
	db.SetMaxOpenConns(6)
	tbl := fullTable(spec.Table)
	insert := "INSERT INTO " + c.q(t, spec.Side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		out.printf("handle %d %d %d", d.ID, d.Attempt, time.Now().UnixNano())
		if spec.Point == "handler" && reached() {
			stop("handler", d.ID)
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if _, err := writerOf(d, db).ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			fmt.Fprintf(os.Stderr, "crash child: row %d: writing the side effect: %v\n", d.ID, err)
			return outcome.Retry()
		}
		if spec.Point == "written" && reached() {
			stop("written", d.ID)
		}
		return outcome.Ack()
	})
	form := &phasedForm{
		inner:   c.newForm(t, tbl),
		settled: func(d *inbox.Delivery, _ outcome.Outcome) { out.printf("settled %d", d.ID) },
	}
	cons := inbox.NewConsumer(db, form, h, &inbox.Config{
		Queue: "q", Workers: 4, PollInterval: cellPoll, Transactional: spec.Transactional,
	})
	out.printf("ready")
	go func() {
		if err := cons.Run(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "crash child: Run:", err)
			os.Exit(2)
		}
	}()
	time.Sleep(time.Minute)
	fmt.Fprintln(os.Stderr, "crash child: not killed within a minute")
	os.Exit(2)
}
