package lease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// ownConn is the pooled connection the form keeps from Open to Close (inbox.Plan.OwnConnection).
// The form's statements outside a transaction run on the pool while it has a connection to
// spare, side by side, and on this connection, one at a time, while it has none: database/sql
// hands a freed connection to any of the requests waiting, picked at random, so without it the
// handlers' requests could keep an extension waiting until its lease ran out.
//
// A connection that turns out broken is replaced at the next statement, from the pool.
type ownConn struct {
	db   *sql.DB
	turn chan struct{} // holds a token while a statement runs on conn

	// Guarded by turn.
	conn  *sql.Conn            // nil once broken, until the next statement takes another
	stmts map[string]*sql.Stmt // statements prepared on conn, by text
}

// keepOwn takes the form's own connection from db, where the pool is bounded and has room for
// it beside one connection for the application and, in transactional mode, one for a delivery's
// transaction; otherwise it returns nil, and every statement runs on the pool.
func keepOwn(ctx context.Context, db *sql.DB, transactional bool) (*ownConn, error) {
	room := 2
	if transactional {
		room = 3
	}
	if db.Stats().MaxOpenConnections < room {
		return nil, nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &ownConn{db: db, turn: make(chan struct{}, 1), conn: conn, stmts: map[string]*sql.Stmt{}}, nil
}

// spare reports whether the pool has a connection to spare for a statement of the form's now:
// an idle one, or room to open one.
func (o *ownConn) spare() bool {
	if o == nil {
		return true
	}
	s := o.db.Stats()
	return s.MaxOpenConnections <= 0 || s.InUse < s.MaxOpenConnections
}

// exec runs s on the connection: prepared there once, or by its text where s runs by its text.
// Its errors are as s.Failed makes them.
func (o *ownConn) exec(ctx context.Context, s *stmt.Stmt, args []any) (res sql.Result, err error) {
	err = o.run(ctx, func(conn *sql.Conn) error {
		if !s.Prepared() {
			res, err = conn.ExecContext(ctx, s.Text(), args...)
			return err
		}
		ps, err := o.prepared(ctx, conn, s.Text())
		if err == nil {
			res, err = ps.ExecContext(ctx, args...)
		}
		return err
	})
	return res, s.Failed(err)
}

// query runs s on the connection, as exec does, and hands its rows to read, closing them after.
func (o *ownConn) query(ctx context.Context, s *stmt.Stmt, args []any, read func(*sql.Rows) error) error {
	return s.Failed(o.run(ctx, func(conn *sql.Conn) error {
		var rows *sql.Rows
		var err error
		if !s.Prepared() {
			rows, err = conn.QueryContext(ctx, s.Text(), args...)
		} else {
			var ps *sql.Stmt
			if ps, err = o.prepared(ctx, conn, s.Text()); err == nil {
				rows, err = ps.QueryContext(ctx, args...)
			}
		}
		return readRows(rows, err, read)
	}))
}

// run takes the connection's turn and runs f on the connection (see on).
func (o *ownConn) run(ctx context.Context, f func(*sql.Conn) error) error {
	if err := o.take(ctx); err != nil {
		return err
	}
	defer o.give()
	return o.on(ctx, f)
}

// take waits for the connection's turn, or for ctx to end.
func (o *ownConn) take(ctx context.Context) error {
	select {
	case o.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *ownConn) give() { <-o.turn }

// on runs f on the connection; the caller has the turn. It first asks the driver whether the
// connection still stands, as database/sql does of a pooled connection it hands out again
// (driver.SessionResetter: pgx and the MySQL driver check the socket), and takes another from
// the pool if not. When the connection turns out broken before f reached the server
// (driver.ErrBadConn, sql.ErrConnDone), it takes another and runs f again, once.
func (o *ownConn) on(ctx context.Context, f func(*sql.Conn) error) error {
	for try := 1; ; try++ {
		if o.conn != nil && o.conn.Raw(func(dc any) error {
			if r, ok := dc.(driver.SessionResetter); ok {
				return r.ResetSession(ctx)
			}
			return nil
		}) != nil {
			o.drop()
		}
		if o.conn == nil {
			conn, err := o.db.Conn(ctx)
			if err != nil {
				return err
			}
			o.conn = conn
		}
		err := f(o.conn)
		if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
			o.drop()
			if try == 1 {
				continue
			}
		}
		return err
	}
}

// prepared returns query prepared on conn, preparing it the first time; the caller has the turn.
func (o *ownConn) prepared(ctx context.Context, conn *sql.Conn, query string) (*sql.Stmt, error) {
	if s := o.stmts[query]; s != nil {
		return s, nil
	}
	s, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	o.stmts[query] = s
	return s, nil
}

// drop gives a broken connection back, for the pool to discard, and forgets its statements; the
// caller has the turn.
func (o *ownConn) drop() {
	for _, s := range o.stmts {
		s.Close()
	}
	clear(o.stmts)
	o.conn.Raw(func(any) error { return driver.ErrBadConn })
	o.conn.Close()
	o.conn = nil
}

// close gives the connection back to the pool, waiting for a statement running on it. A
// connection a failed transaction end discarded is no error of close's.
func (o *ownConn) close() error {
	if o == nil {
		return nil
	}
	o.turn <- struct{}{}
	defer func() { <-o.turn }()
	var errs []error
	for _, s := range o.stmts {
		errs = append(errs, s.Close())
	}
	clear(o.stmts)
	if o.conn != nil {
		// A transaction on it whose end failed (on a Galera node, a claim's COMMIT that failed
		// certification) has closed it already (dialect.Discard): nothing is left to give back.
		if err := o.conn.Close(); !errors.Is(err, sql.ErrConnDone) {
			errs = append(errs, err)
		}
		o.conn = nil
	}
	return errors.Join(errs...)
}

// begin opens a transaction at READ COMMITTED on the connection, for the MySQL and MariaDB
// claim, and returns it with the function to call once the transaction has ended, which gives
// the turn back. A transaction that cannot begin, or whose end fails, discards the connection
// (dialect.BeginOn); the next statement takes another.
func (o *ownConn) begin(ctx context.Context, level dialect.Dialect) (dialect.Tx, func(), error) {
	if err := o.take(ctx); err != nil {
		return nil, nil, err
	}
	var tx dialect.Tx
	err := o.on(ctx, func(conn *sql.Conn) (err error) {
		tx, err = dialect.BeginOn(ctx, level, conn)
		return err
	})
	if err != nil {
		o.give()
		return nil, nil, err
	}
	return tx, o.give, nil
}
