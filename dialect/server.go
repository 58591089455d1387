package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

func checkPostgres(ctx context.Context, db *sql.DB) error {
	var num string
	if err := db.QueryRowContext(ctx, "SHOW server_version_num").Scan(&num); err != nil {
		return versionError(ctx, db, "Postgres", err)
	}
	if n, _ := strconv.Atoi(num); n < 90500 {
		return sentinel.Errorf(sentinel.ServerTooOld, "", "Postgres %s; the library needs 9.5 or later (SKIP LOCKED): upgrade the server", num)
	}
	return nil
}

// checkMySQLFamily checks the server behind a MySQL or MariaDB dialect. A MySQL dialect also runs
// on MariaDB (10.6 or later); a MariaDB dialect on a MySQL server is refused, since their
// advisory lock and SKIP LOCKED behaviour is not the same.
func checkMySQLFamily(ctx context.Context, db *sql.DB, wantMariaDB bool) error {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return versionError(ctx, db, "MySQL or MariaDB", err)
	}
	if strings.Contains(version, "PostgreSQL") {
		return dialectError("the server is %s, but the dialect is MySQL or MariaDB: use dialect.Postgres", version)
	}
	isMariaDB := strings.Contains(strings.ToLower(version), "mariadb")
	if wantMariaDB && !isMariaDB {
		return dialectError("the server is MySQL %s but the dialect is MariaDB: use dialect.MySQL", version)
	}
	if isMariaDB {
		if !atLeast(version, 10, 6, 0) {
			return sentinel.Errorf(sentinel.ServerTooOld, "", "MariaDB %s; the library needs 10.6 or later (SKIP LOCKED): upgrade the server", version)
		}
		return nil
	}
	if !atLeast(version, 8, 0, 1) {
		return sentinel.Errorf(sentinel.ServerTooOld, "", "MySQL %s; the library needs 8.0.1 or later (SKIP LOCKED): upgrade the server", version)
	}
	return nil
}

func checkSQLite(ctx context.Context, db *sql.DB) error {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err != nil {
		return versionError(ctx, db, "SQLite", err)
	}
	if !atLeast(version, 3, 35, 0) {
		return sentinel.Errorf(sentinel.ServerTooOld, "", "SQLite %s; the library needs 3.35 or later (RETURNING): upgrade the driver", version)
	}
	return nil
}

// versionError explains a version query that failed: when the server answers SELECT VERSION()
// or SELECT sqlite_version() as another database than the dialect's, ErrDialect; otherwise the
// query's own error stands (the server cannot be reached, or the connection was cut under the
// query: Postgres answers SELECT VERSION() too, and a MySQL server that answers it now only
// failed the first time).
func versionError(ctx context.Context, db *sql.DB, want string, err error) error {
	var version string
	if db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version) == nil {
		postgres := strings.Contains(version, "PostgreSQL")
		if (want == "Postgres" && postgres) || (want == "MySQL or MariaDB" && !postgres) {
			return sentinel.Errorf(nil, "", "reading the %s server version: %w", want, err)
		}
		return dialectError("the dialect is %s, but the server is %s: use the dialect of the server", want, version)
	}
	if db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version) == nil {
		return dialectError("the dialect is %s, but the database is SQLite %s: use dialect.SQLite", want, version)
	}
	return sentinel.Errorf(nil, "", "reading the %s server version: %w", want, err)
}

// atLeast reports whether version ("10.11.19-MariaDB-0+deb12u1", "8.0.36") is at least
// major.minor.patch.
func atLeast(version string, major, minor, patch int) bool {
	var parts [3]int
	rest := version
	for i := range parts {
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		parts[i], _ = strconv.Atoi(rest[:end])
		if end >= len(rest) || rest[end] != '.' {
			break
		}
		rest = rest[end+1:]
	}
	want := [3]int{major, minor, patch}
	for i := range parts {
		if parts[i] != want[i] {
			return parts[i] > want[i]
		}
	}
	return true
}

// retryable recognises transient conflicts by the driver's SQLSTATE where the error exposes it
// (pgx, lib/pq) and by the server's error number in the message otherwise (go-sql-driver/mysql
// prints "Error 1213 (40001): …"; SQLite drivers print SQLITE_BUSY).
func retryable(c *Caps, err error) bool {
	if err == nil || errors.Is(err, driver.ErrBadConn) {
		return false
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && slices.Contains(c.ConflictCodes, coded.SQLState()) {
		return true
	}
	msg := err.Error()
	for _, mark := range c.ConflictMarks {
		if strings.Contains(msg, mark) {
			return true
		}
	}
	return false
}
