package dialect

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// StatementLost reports whether err is a server refusing a prepared statement of the
// connection's own rather than the statement's text (Caps.StatementLostCodes of any of the
// databases: on Postgres 26000, it does not exist, and 42P05, it exists already). A pooler in
// transaction mode causes it (PgBouncer before 1.21 hands each transaction the next free server
// connection, and a prepared statement stays on the one it was prepared on), for as long as
// the pooler and the driver are set as they are.
func StatementLost(err error) bool {
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) {
		return false
	}
	for _, c := range []*Caps{&postgresCaps, &mysqlCaps, &mariadbCaps, &sqliteCaps} {
		if slices.Contains(c.StatementLostCodes, coded.SQLState()) {
			return true
		}
	}
	return false
}

// Pooled returns err, where StatementLost reports it, with what causes it and what to change:
// it reads as err followed by the pooler, inbox.Config.UnpreparedStatements (which unprepared
// says is set already), pgx's default_query_exec_mode=exec and session pooling, and it matches
// inbox.ErrDialect as well as err: the connection cannot run the statements as the driver
// sends them, and trying again will not mend it. Any other error, or one Pooled returned
// already, is returned as it is.
func Pooled(err error, unprepared bool) error {
	if err == nil {
		// Every statement's result passes here: a success allocates nothing.
		return nil
	}
	var p *pooledError
	if !StatementLost(err) || errors.As(err, &p) {
		return err
	}
	return &pooledError{err: err, unprepared: unprepared}
}

type pooledError struct {
	err        error
	unprepared bool
}

func (e *pooledError) Error() string {
	remedy := "set inbox.Config.UnpreparedStatements and, with pgx, default_query_exec_mode=exec (or simple_protocol) in the DSN"
	if e.unprepared {
		remedy = "inbox.Config.UnpreparedStatements is set, so the driver prepared the statement itself: with pgx, set default_query_exec_mode=exec (or simple_protocol) in the DSN"
	}
	return fmt.Sprintf("%v: the server connection lost or already held a prepared statement of this connection, as a pooler in transaction mode makes it (PgBouncer before 1.21): %s, or connect directly or through session pooling", e.err, remedy)
}

func (e *pooledError) Unwrap() []error { return []error{e.err, sentinel.Dialect} }
