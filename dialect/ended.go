package dialect

import (
	"context"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"time"
)

// probeTimeout bounds a question TxEnded asks the server. A probe that times out cuts its
// connection (the drivers do), which ends the transaction all the same.
const probeTimeout = 5 * time.Second

// Postgres refuses every statement of a transaction a statement failed in, until it is rolled
// back (or back to a savepoint), so nothing after the failure can run outside it.
func (postgres) TxEnded(context.Context, Tx, error) bool { return false }

// MySQL cannot be asked whether a session is in a transaction, so the error tells: a deadlock
// (1213) and a lock table overflow (1206) roll the whole transaction back, a lock wait timeout
// (1205) does where innodb_rollback_on_timeout is on (the server is asked), and a lost or
// killed connection ends it.
func (mysql) TxEnded(ctx context.Context, tx Tx, err error) bool {
	if err == nil {
		return false
	}
	if connectionLost(err) {
		return true
	}
	switch mysqlErrorNumber(err) {
	case 1213, 1206, 1927, 1053, 3169, 4031:
		// A deadlock, the lock table full, the connection killed (MariaDB), the server shutting
		// down, the session killed, the client timed out (MySQL).
		return true
	case 1205:
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		defer cancel()
		var on bool
		if err := tx.QueryRowContext(ctx, "SELECT @@innodb_rollback_on_timeout").Scan(&on); err != nil {
			return true
		}
		return on
	}
	return false
}

// MariaDB is asked, on the transaction's connection: @@in_transaction is 0 once the server has
// ended the transaction, whatever ended it. A probe that fails means the connection is gone,
// and the transaction with it.
func (mariadb) TxEnded(ctx context.Context, tx Tx, _ error) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	var in int
	if err := tx.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&in); err != nil {
		return true
	}
	return in == 0
}

// SQLite's transactions ask SQLite themselves after a failed statement (see sqliteTx); after
// rows were read, whose errors the reader alone sees, they are asked now.
func (sqlite) TxEnded(_ context.Context, tx Tx, err error) bool {
	stx, ok := tx.(*sqliteTx)
	if !ok {
		return false
	}
	if err == nil && stx.endedBySQLite() == nil {
		stx.probe(errors.New("a statement failed while its rows were read"))
	}
	return stx.endedBySQLite() != nil
}

// connectionLost reports an error that leaves the connection unusable, and with it any
// transaction on it.
func connectionLost(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || strings.Contains(err.Error(), "invalid connection")
}

// mysqlErrorNumber returns the server error number a MySQL or MariaDB error carries ("Error
// 1213 (40001): Deadlock found…", as go-sql-driver/mysql formats it), or 0.
func mysqlErrorNumber(err error) int {
	msg := err.Error()
	const mark = "Error "
	for i := strings.Index(msg, mark); i >= 0; {
		rest := msg[i+len(mark):]
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		if n, convErr := strconv.Atoi(rest[:end]); convErr == nil && end > 0 {
			return n
		}
		next := strings.Index(rest, mark)
		if next < 0 {
			break
		}
		i += len(mark) + next
	}
	return 0
}

// DuplicateOn reports whether err is MySQL's or MariaDB's duplicate-key error (1062) on the
// index named index, which go-sql-driver/mysql formats as "Error 1062 (23000): Duplicate entry
// '…' for key '…'": MariaDB names the index alone, MySQL (8.0.19 and later) the table, a dot and
// the index. A duplicate on any other index (the primary key's, an application's own) is not
// one, and is the caller's to report as it is.
func DuplicateOn(err error, index string) bool {
	if err == nil || mysqlErrorNumber(err) != 1062 {
		return false
	}
	msg := err.Error()
	const mark = "for key '"
	i := strings.LastIndex(msg, mark)
	if i < 0 {
		return false
	}
	key := strings.TrimSuffix(msg[i+len(mark):], "'")
	return key == index || strings.HasSuffix(key, "."+index)
}
