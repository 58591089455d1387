package harness

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Trips counts what a Target's connections send to the database (OpenCounting): round trips,
// driver calls by kind, and commits. Counting costs a few atomic additions per call and no
// allocation beyond one wrapper per connection and per prepared statement.
//
// A round trip to a server is counted on the wire: a write that follows a read (or opens the
// connection) starts one, so a request written in several pieces, or a message that wants no
// reply followed by the next request (a statement's close on MySQL), is one. SQLite has no
// server: there a round trip is a driver call that reaches the engine (Prepare, Exec, Query,
// Begin, Commit, Rollback, Ping).
//
// A commit is a COMMIT sent (a driver Tx.Commit, or a COMMIT or END statement, as the SQLite
// dialect runs; after a COMMIT AND CHAIN, as the row lock form runs, the connection's next
// transaction is open), whatever its transaction did, or a statement run outside a transaction that
// changed rows, which the server commits on its own: a statement that changes rows by its text
// (INSERT, UPDATE, DELETE, REPLACE, MERGE, or a WITH whose queries do) and reported rows
// affected or returned a row. A commit is counted as not waiting for the disk when a statement
// of its transaction mentions Postgres's synchronous_commit and off (SET LOCAL, or set_config
// in the statement's text); a setting kept for the session is not followed to later
// transactions.
type Trips struct {
	wired bool // round trips are counted on the wire
	wire  atomic.Int64
	calls [numCalls]atomic.Int64
	// commits are COMMITs sent, autocommits statements that changed rows outside a
	// transaction, unflushed those of either that set synchronous_commit off.
	commits, autocommits, unflushed atomic.Int64
}

// Call is a kind of driver call.
type Call int

// The driver calls counted. Reset is database/sql's check of a pooled connection before
// reusing it (driver.SessionResetter), which may reach the server (pgx pings a connection idle
// for over a second); Close is a prepared statement's.
const (
	CallPrepare Call = iota
	CallExec
	CallQuery
	CallBegin
	CallCommit
	CallRollback
	CallPing
	CallReset
	CallClose
	numCalls
)

var callNames = [numCalls]string{"prepare", "exec", "query", "begin", "commit", "rollback", "ping", "reset", "close"}

func (c Call) String() string { return callNames[c] }

// TripCounts is what Trips counted, or the difference of two snapshots.
type TripCounts struct {
	Wired bool  // the servers' round trips were counted on the wire
	Wire  int64 // round trips counted on the wire
	Calls [numCalls]int64
	// Commits are COMMITs sent, Autocommits statements that changed rows outside a
	// transaction; Unflushed counts those of both that did not wait for the disk.
	Commits, Autocommits, Unflushed int64
}

// Snapshot is what t counted so far.
func (t *Trips) Snapshot() TripCounts {
	c := TripCounts{Wired: t.wired, Wire: t.wire.Load(), Commits: t.commits.Load(), Autocommits: t.autocommits.Load(), Unflushed: t.unflushed.Load()}
	for i := range c.Calls {
		c.Calls[i] = t.calls[i].Load()
	}
	return c
}

// Sub is what was counted between snapshot b and c.
func (c TripCounts) Sub(b TripCounts) TripCounts {
	d := TripCounts{Wired: c.Wired, Wire: c.Wire - b.Wire, Commits: c.Commits - b.Commits,
		Autocommits: c.Autocommits - b.Autocommits, Unflushed: c.Unflushed - b.Unflushed}
	for i := range d.Calls {
		d.Calls[i] = c.Calls[i] - b.Calls[i]
	}
	return d
}

// RoundTrips is the round trips counted: on the wire for a server, the driver calls that reach
// the engine for SQLite.
func (c TripCounts) RoundTrips() int64 {
	if c.Wired {
		return c.Wire
	}
	var n int64
	for _, k := range []Call{CallPrepare, CallExec, CallQuery, CallBegin, CallCommit, CallRollback, CallPing} {
		n += c.Calls[k]
	}
	return n
}

// AllCommits is every commit counted, COMMITs and statements committed on their own.
func (c TripCounts) AllCommits() int64 { return c.Commits + c.Autocommits }

// connector is the connector of a target opened by OpenCounting: the driver's own, with its
// network connections counted where the driver dials one, and its connections wrapped.
func (t *Trips) connector(driverName, source string) (driver.Connector, error) {
	var inner driver.Connector
	switch driverName {
	case "pgx":
		cfg, err := pgx.ParseConfig(source)
		if err != nil {
			return nil, err
		}
		dial := cfg.DialFunc
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return t.dialed(dial(ctx, network, addr))
		}
		inner, t.wired = stdlib.GetConnector(*cfg), true
	case "mysql":
		cfg, err := mysql.ParseDSN(source)
		if err != nil {
			return nil, err
		}
		// Dialing as the driver does without a DialFunc: a plain net.Dialer.
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return t.dialed(d.DialContext(ctx, network, addr))
		}
		if inner, err = mysql.NewConnector(cfg); err != nil {
			return nil, err
		}
		t.wired = true
	default:
		// SQLite, which dials nothing: its connections alone are counted. Its driver opens
		// them from the DSN, as database/sql does; sql.Open finds the registered driver and
		// connects to nothing.
		db, err := sql.Open(driverName, source)
		if err != nil {
			return nil, err
		}
		inner = dsnConnector{db.Driver(), source}
		db.Close()
	}
	return &countingConnector{inner: inner, trips: t}, nil
}

// dsnConnector is what database/sql makes of a driver without driver.DriverContext.
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

func (t *Trips) dialed(c net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c, trips: t}, nil
}

// wireConn counts the round trips of one network connection.
type wireConn struct {
	net.Conn
	trips *Trips
	sent  atomic.Bool // written to since the last read that returned data
}

func (c *wireConn) Write(p []byte) (int, error) {
	if !c.sent.Swap(true) {
		c.trips.wire.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.sent.Store(false)
	}
	return n, err
}

// SyscallConn hands out the socket, as the driver's own dialer's connection does: the MySQL
// driver checks a pooled connection's socket for a close before reusing it, and takes an error
// here for a broken connection.
func (c *wireConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("counting round trips: a %T has no socket to hand out", c.Conn)
	}
	return sc.SyscallConn()
}

type countingConnector struct {
	inner driver.Connector
	trips *Trips
}

// contextConn is what the wrapper needs of a driver's connection: statements run with a
// context. The drivers the harness opens have it; database/sql would run a connection without
// it differently (through its legacy methods), which the wrapper does not reproduce.
type contextConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

// contextStmt is what the wrapper needs of a driver's prepared statement, for the same reason.
type contextStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// withContext is v, a driver's connection or statement, as C, the context methods the wrapper
// runs it by. Where v lacks them it closes v and fails, saying what v does not run: lacks.
func withContext[C any](v io.Closer, lacks string) (C, error) {
	c, ok := v.(C)
	if !ok {
		v.Close()
		return c, fmt.Errorf("counting round trips: a %T does not run %s: open it without counting", v, lacks)
	}
	return c, nil
}

func (c *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, err := withContext[contextConn](dc, "statements with a context (driver.ConnPrepareContext, ConnBeginTx, ExecerContext, QueryerContext)")
	if err != nil {
		return nil, err
	}
	conn := &countingConn{inner: inner, trips: c.trips}
	conn.tx.conn = conn
	return conn, nil
}

func (c *countingConnector) Driver() driver.Driver { return c.inner.Driver() }

// countingConn counts the calls of one driver connection and follows its transaction, to tell
// a statement committed on its own from one inside a transaction. database/sql runs one call
// at a time on a connection, so its state needs no lock.
//
// Beside the context methods it offers the optional interfaces database/sql and the library
// look for (the library asks a connection for driver.SessionResetter through sql.Conn.Raw),
// passing each to the driver's connection, or answering as database/sql does of a connection
// without it: no ping, no reset, valid, the default conversion of arguments. The library also
// keeps what it learnt of a MySQL or MariaDB session under the connection Raw hands out: this
// wrapper, one per driver connection and alive as long as it, serves as well.
type countingConn struct {
	inner     contextConn
	trips     *Trips
	inTx      bool // a transaction is open
	unflushed bool // the open transaction set synchronous_commit off
	tx        countingTx
	rows      countingRows // reused by the statements on their own that return rows
}

func (c *countingConn) count(k Call) { c.trips.calls[k].Add(1) }

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.inner.PrepareContext(ctx, query)
	c.count(CallPrepare)
	if err != nil {
		return nil, err
	}
	inner, err := withContext[contextStmt](s, "with a context (driver.StmtExecContext, StmtQueryContext)")
	if err != nil {
		return nil, err
	}
	cs := countingStmt{inner: inner, conn: c, what: classify(query)}
	// database/sql converts a statement's arguments by its ColumnConverter where it has one:
	// the wrapper has one exactly when the driver's statement does.
	if cc, ok := s.(driver.ColumnConverter); ok {
		return &convertingStmt{cs, cc}, nil
	}
	return &cs, nil
}

func (c *countingConn) Close() error { return c.inner.Close() }

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.inner.BeginTx(ctx, opts)
	c.count(CallBegin)
	if err != nil {
		return nil, err
	}
	c.inTx, c.unflushed = true, false
	c.tx.inner = tx
	return &c.tx, nil
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.inner.ExecContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) { // nothing sent: database/sql prepares the statement
		return nil, err
	}
	c.count(CallExec)
	return c.executed(classify(query), res, err)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.inner.QueryContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err
	}
	c.count(CallQuery)
	return c.queried(classify(query), rows, err)
}

func (c *countingConn) Ping(ctx context.Context) error {
	return countedIf(c, CallPing, func(p driver.Pinger) error { return p.Ping(ctx) })
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	return countedIf(c, CallReset, func(r driver.SessionResetter) error { return r.ResetSession(ctx) })
}

// countedIf runs call, counted as k, where the driver's connection implements I; where it does
// not, it answers nil, as database/sql does of a connection without I.
func countedIf[I any](c *countingConn, k Call, call func(I) error) error {
	i, ok := c.inner.(I)
	if !ok {
		return nil
	}
	c.count(k)
	return call(i)
}

func (c *countingConn) IsValid() bool {
	v, ok := c.inner.(driver.Validator)
	return !ok || v.IsValid()
}

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip // database/sql's default conversion, as without a checker
}

// ran follows the connection's transaction through a statement that ran, by its
// classification, and says whether it changes rows on its own: a write statement outside a
// transaction, which the server commits when it changed a row.
func (c *countingConn) ran(what statement, err error) (solo bool) {
	if err != nil {
		return false // a statement that failed began, ended and changed nothing
	}
	switch what.kind {
	case beginStatement:
		c.inTx, c.unflushed = true, what.unflushed
	case commitStatement:
		if c.inTx {
			c.committed()
			c.inTx = what.chains // COMMIT AND CHAIN begins the next transaction at once
		}
	case rollbackStatement:
		c.inTx = false
	default:
		if c.inTx {
			c.unflushed = c.unflushed || what.unflushed
			return false
		}
		return what.kind == writeStatement
	}
	return false
}

// executed follows an Exec: a statement on its own committed when it reports rows affected
// (or cannot say).
func (c *countingConn) executed(what statement, res driver.Result, err error) (driver.Result, error) {
	if c.ran(what, err) {
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			c.trips.autocommitted(what.unflushed)
		}
	}
	return res, err
}

// queried follows a Query: a statement on its own committed when it returns a row (RETURNING
// the rows it changed), which its rows watch for.
func (c *countingConn) queried(what statement, rows driver.Rows, err error) (driver.Rows, error) {
	if !c.ran(what, err) {
		return rows, err
	}
	r := &c.rows
	if r.Rows != nil {
		r = new(countingRows) // the connection's other rows are still open (SQLite allows it)
	}
	*r = countingRows{Rows: rows, conn: c, what: what}
	return r, nil
}

// countingRows are the rows of a statement that changes rows on its own: its commit is counted
// at its first row. They offer the driver's rows' Columns, Next and Close alone, not their
// column types, which neither the library nor the raw loops ask of such a statement.
type countingRows struct {
	driver.Rows
	conn *countingConn
	what statement
	seen bool // a row came
}

func (r *countingRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == nil && !r.seen {
		r.seen = true
		r.conn.trips.autocommitted(r.what.unflushed)
	}
	return err
}

func (r *countingRows) Close() error {
	err := r.Rows.Close()
	r.Rows = nil // the connection's own rows are free again
	return err
}

func (t *Trips) autocommitted(unflushed bool) {
	t.autocommits.Add(1)
	if unflushed {
		t.unflushed.Add(1)
	}
}

// committed counts the open transaction's COMMIT and ends it.
func (c *countingConn) committed() {
	c.trips.commits.Add(1)
	if c.unflushed {
		c.trips.unflushed.Add(1)
	}
	c.inTx, c.unflushed = false, false
}

// countingTx is a connection's open transaction; the connection has one at a time, so the
// wrapper is the connection's own.
type countingTx struct {
	conn  *countingConn
	inner driver.Tx
}

func (tx *countingTx) Commit() error {
	err := tx.inner.Commit()
	tx.conn.count(CallCommit)
	if err != nil {
		tx.conn.inTx = false
		return err
	}
	tx.conn.committed()
	return nil
}

func (tx *countingTx) Rollback() error {
	tx.conn.count(CallRollback)
	tx.conn.inTx = false
	return tx.inner.Rollback()
}

// countingStmt counts a prepared statement's executions.
type countingStmt struct {
	inner contextStmt
	conn  *countingConn
	what  statement
}

func (s *countingStmt) Close() error {
	s.conn.count(CallClose)
	return s.inner.Close()
}

func (s *countingStmt) NumInput() int { return s.inner.NumInput() }

// Exec and Query are driver.Stmt's legacy methods, which database/sql does not call on a
// statement with the context ones.
func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	res, err := s.inner.Exec(args)
	s.conn.count(CallExec)
	return s.conn.executed(s.what, res, err)
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	rows, err := s.inner.Query(args)
	s.conn.count(CallQuery)
	return s.conn.queried(s.what, rows, err)
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	res, err := s.inner.ExecContext(ctx, args)
	s.conn.count(CallExec)
	return s.conn.executed(s.what, res, err)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := s.inner.QueryContext(ctx, args)
	s.conn.count(CallQuery)
	return s.conn.queried(s.what, rows, err)
}

// CheckNamedValue is the statement's checker, else its connection's, as database/sql picks.
func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

// convertingStmt is a countingStmt over a statement with a ColumnConverter.
type convertingStmt struct {
	countingStmt
	cc driver.ColumnConverter
}

func (s *convertingStmt) ColumnConverter(idx int) driver.ValueConverter {
	return s.cc.ColumnConverter(idx)
}

// statement is what a statement's text says it does to its connection's transaction.
type statement struct {
	kind      statementKind
	unflushed bool // it sets synchronous_commit off
	chains    bool // a COMMIT AND CHAIN: it begins the next transaction as it commits
}

type statementKind int

const (
	otherStatement statementKind = iota
	writeStatement
	beginStatement
	commitStatement
	rollbackStatement
)

// classify reads a statement's text: its first word, the words of a WITH, and whether it sets
// synchronous_commit off. It allocates nothing.
func classify(query string) statement {
	s := statement{unflushed: strings.Contains(query, "synchronous_commit") && strings.Contains(query, "off")}
	first, rest := word(query)
	switch {
	case isWord(first, "insert", "update", "delete", "replace", "merge"):
		s.kind = writeStatement
	case isWord(first, "begin", "start"):
		s.kind = beginStatement
	case isWord(first, "commit", "end"):
		s.kind = commitStatement
		and, rest := word(rest)
		chain, _ := word(rest)
		s.chains = isWord(and, "and") && isWord(chain, "chain")
	case isWord(first, "rollback"):
		// ROLLBACK TO a savepoint leaves the transaction open.
		if w, _ := word(rest); !isWord(w, "to") {
			s.kind = rollbackStatement
		}
	case isWord(first, "with") && withWrites(rest):
		s.kind = writeStatement
	}
	return s
}

// withWrites says whether the rest of a WITH statement has a data-modifying query: an INSERT,
// UPDATE or DELETE word outside quotes, other than a locking clause's UPDATE (FOR UPDATE, FOR
// NO KEY UPDATE) or an upsert's (ON DUPLICATE KEY UPDATE, ON CONFLICT … DO UPDATE, which
// follow an INSERT anyway).
func withWrites(s string) bool {
	var prev string
	for s != "" {
		var w string
		w, s = word(s)
		if isWord(w, "insert", "delete") || isWord(w, "update") && !isWord(prev, "for", "key", "do") {
			return true
		}
		prev = w
	}
	return false
}

// word splits the next word (letters, digits, underscores) off s, skipping whatever comes
// before it: spaces, punctuation, and quoted strings and names whole.
func word(s string) (w, rest string) {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\'' || ch == '"' || ch == '`':
			end := strings.IndexByte(s[i+1:], ch)
			if end < 0 {
				return "", ""
			}
			i += end + 1
		case isWordByte(ch):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			return s[i:j], s[j:]
		}
	}
	return "", ""
}

func isWordByte(ch byte) bool {
	return ch == '_' || '0' <= ch && ch <= '9' || 'a' <= ch|0x20 && ch|0x20 <= 'z'
}

func isWord(w string, words ...string) bool {
	for _, x := range words {
		if strings.EqualFold(w, x) {
			return true
		}
	}
	return false
}
