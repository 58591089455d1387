package dialect

import (
	"context"
	"database/sql"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"weak"
)

// A transaction at a level of its own costs MySQL and MariaDB a round trip more than one at
// the session's: go-sql-driver/mysql sends SET TRANSACTION ISOLATION LEVEL … before START
// TRANSACTION whenever sql.TxOptions names a level. So beginOn asks each connection once which
// level its session opens transactions at (Caps.SessionLevelQueries) and begins with no options
// where that is the level wanted. database/sql has no per-connection state or hook, so what is
// known of a session is kept here, under its driver connection, and forgotten when the garbage
// collector reclaims that connection.

// session is what the library knows of one connection's session. Only the goroutine holding
// the connection reads or writes asked, level and query (database/sql hands a connection from
// one holder to the next under its own lock); unsure is set by statements, which may run on
// the connection's transaction from several goroutines.
type session struct {
	asked bool   // the level was read, or cannot be read on this connection
	level Level  // the level read; "" for none the library knows
	query string // the query of Caps.SessionLevelQueries the server answered
	// unsure says a statement ran by its text in a transaction on the connection since level
	// was read: a handler's, which may have changed the session's level (SET SESSION
	// TRANSACTION ISOLATION LEVEL, or a stored function that sets tx_isolation).
	unsure atomic.Bool
}

// sessions are the sessions of the driver connections the library has begun transactions on,
// each under a weak pointer to its connection, which does not keep the connection alive.
var sessions = struct {
	mu sync.Mutex
	m  map[weak.Pointer[byte]]*session
}{m: map[weak.Pointer[byte]]*session{}}

// sessionOf returns the session of conn's driver connection, or nil when the connection is
// closed or its driver connection is not a pointer (go-sql-driver/mysql's is), which could not
// be told apart from another: such a connection's transactions set their level.
func sessionOf(conn *sql.Conn) *session {
	var s *session
	conn.Raw(func(dc any) error {
		v := reflect.ValueOf(dc)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Size() == 0 {
			return nil
		}
		// The driver connection's first byte stands for it: a weak pointer names an object
		// by its address and offset, and a typed one cannot be made for a type known only at
		// run time. Nothing is read through it.
		p := (*byte)(v.UnsafePointer())
		key := weak.Make(p)
		sessions.mu.Lock()
		defer sessions.mu.Unlock()
		if s = sessions.m[key]; s == nil {
			s = new(session)
			sessions.m[key] = s
			runtime.AddCleanup(p, forgetSession, key)
		}
		return nil
	})
	return s
}

// forgetSession drops the session of a driver connection the garbage collector reclaimed.
func forgetSession(key weak.Pointer[byte]) {
	sessions.mu.Lock()
	delete(sessions.m, key)
	sessions.mu.Unlock()
}

// atSessionLevel reports whether conn's session opens transactions at level, so that a
// transaction at level needs no SET TRANSACTION, and returns the session for the transaction
// to mark unsure (nil when c asks no server: Caps.SessionLevelQueries is empty). It asks the
// server on the connection's first transaction, and again when statements by text may have
// changed a session that was at level; a session at another level needs no asking, since its
// transactions set their level.
func atSessionLevel(ctx context.Context, c *Caps, conn *sql.Conn, level Level) (*session, bool) {
	if len(c.SessionLevelQueries) == 0 {
		return nil, false
	}
	s := sessionOf(conn)
	if s == nil {
		return nil, false
	}
	if !s.asked || s.level == level && s.unsure.Load() {
		s.ask(ctx, c, conn)
	}
	return s, s.level == level && !s.unsure.Load()
}

// ask reads the session's level, trying the queries in turn while the server knows no such
// variable (MariaDB before 11.1 has no transaction_isolation, MySQL 8 no tx_isolation), or the
// one it answered before: the MySQL and MariaDB dialects try theirs in another order, and may
// share a connection (the lease form claims at dialect.MySQL's READ COMMITTED on either). Any
// other failure leaves the level unknown on this connection, whose transactions then set their
// level; a connection that failed is discarded when its transaction cannot begin.
func (s *session) ask(ctx context.Context, c *Caps, conn *sql.Conn) {
	s.asked, s.level = true, ""
	for _, q := range c.SessionLevelQueries {
		if s.query != "" && q != s.query {
			continue
		}
		var value string
		err := conn.QueryRowContext(ctx, q).Scan(&value)
		if err == nil {
			s.query, s.level = q, levelNamed(value)
			s.unsure.Store(false)
			return
		}
		if mysqlErrorNumber(err) != 1193 { // 1193: unknown system variable
			return
		}
	}
}

// levelNamed maps a session's isolation level as MySQL and MariaDB name it (READ-COMMITTED, …)
// to its Level, or "" for a name it does not know.
func levelNamed(name string) Level {
	name = strings.ReplaceAll(name, "-", " ")
	for _, l := range []Level{LevelReadUncommitted, LevelReadCommitted, LevelRepeatableRead, LevelSerializable} {
		if strings.EqualFold(name, string(l)) {
			return l
		}
	}
	return ""
}

// sessionLevel is the level a transaction of d opens at, as a session names it: the declared
// level, or READ COMMITTED for the default where Caps.DefaultReadCommitted says so.
func sessionLevel(d Dialect) Level {
	if l := d.Level(); l != LevelDefault || !d.Caps().DefaultReadCommitted {
		return l
	}
	return LevelReadCommitted
}
