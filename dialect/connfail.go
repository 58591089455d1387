package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
)

// ConnectionFailed reports whether err says that the connection a statement ran on failed
// under it, rather than that the server refused the statement: the connection cut, reset or
// closed (driver.ErrBadConn, sql.ErrConnDone, an EOF, a network error, go-sql-driver/mysql's
// "invalid connection"), or its session ended by the server (a SQLSTATE of class 08, or 57P01
// to 57P03 and 57P05 on Postgres; errors 1053, 1152, 1927, 2006, 2013, 3169 and 4031 on MySQL
// and MariaDB). The statement is not at fault, and may run on another connection. A context
// that ended is not a connection's failure.
func ConnectionFailed(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) {
		return true
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		state := coded.SQLState()
		return strings.HasPrefix(state, "08") || slices.Contains(sessionEndedStates, state)
	}
	return strings.Contains(err.Error(), "invalid connection") || slices.Contains(sessionEndedErrors, mysqlErrorNumber(err))
}

// sessionEndedStates are the SQLSTATE codes outside class 08 (connection exception) with which
// Postgres ends a session: 57P01 admin_shutdown (pg_terminate_backend, a fast shutdown), 57P02
// crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down), 57P05
// idle_session_timeout.
var sessionEndedStates = []string{"57P01", "57P02", "57P03", "57P05"}

// sessionEndedErrors are the MySQL and MariaDB errors of a session that ended: 1053 server
// shutdown, 1152 aborted connection, 1927 connection killed (MariaDB), 2006 server gone away
// and 2013 connection lost (the client library's), 3169 session killed and 4031 disconnected
// for inactivity (MySQL).
var sessionEndedErrors = []int{1053, 1152, 1927, 2006, 2013, 3169, 4031}
