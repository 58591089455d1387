package sqlmocktests

import (
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/rowlock"
)

// dbCase is the tests' case: one database at one level, as a test runs a form on it.
type dbCase struct {
	name  string             // the subtest's name
	db    string             // the database, as the golden files name it
	d     dialect.Dialect    // at the level under test
	level sql.IsolationLevel // what the form's transactions at the dialect's level begin with
}

// The databases at their default levels: a claim's transaction on MySQL and MariaDB begins at
// READ COMMITTED. The forms' tests add declared levels.
var (
	onPostgres = dbCase{name: "postgres", db: "postgres", d: dialect.Postgres[isolation.Default]{}, level: sql.LevelDefault}
	onMySQL    = dbCase{name: "mysql", db: "mysql", d: dialect.MySQL[isolation.Default]{}, level: sql.LevelReadCommitted}
	onMariaDB  = dbCase{name: "mariadb", db: "mariadb", d: dialect.MariaDB[isolation.Default]{}, level: sql.LevelReadCommitted}
	onSQLite   = dbCase{name: "sqlite", db: "sqlite", d: dialect.SQLite[isolation.Default]{}}
)

func (c dbCase) mysqlFamily() bool { return c.db == "mysql" || c.db == "mariadb" }

// onMySQLFamily are the cases of cases on MySQL or MariaDB.
func onMySQLFamily(cases []dbCase) []dbCase {
	var out []dbCase
	for _, c := range cases {
		if c.mysqlFamily() {
			out = append(out, c)
		}
	}
	return out
}

// rowlockForm is the row lock form over tbl on c's dialect, a server's (SQLite has no row locks).
func (c dbCase) rowlockForm(tbl inbox.Table) *rowlock.Form[rowlock.Dialect] {
	return rowlock.New(c.d.(rowlock.Dialect), tbl)
}

// advisoryForm is the advisory form over tbl with key template key on c's dialect, a server's
// (SQLite has no session locks).
func (c dbCase) advisoryForm(tbl inbox.Table, key string) *advisory.Form[advisory.Dialect] {
	return advisory.New(c.d.(advisory.Dialect), tbl, &advisory.Config{Key: key})
}

// lockAnswer is how c's database answers a lock or an unlock: true or false on Postgres, 1 or 0
// on MySQL and MariaDB.
func (c dbCase) lockAnswer(ok bool) driver.Value {
	switch {
	case c.db == "postgres":
		return ok
	case ok:
		return int64(1)
	}
	return int64(0)
}

// versions are each database's version query and an answer every form accepts.
var versions = map[string]struct{ query, answer string }{
	"postgres": {"SHOW server_version_num", "160004"},
	"mysql":    {"SELECT VERSION()", "8.0.36"},
	"mariadb":  {"SELECT VERSION()", "10.11.6-MariaDB-0+deb12u1"},
	"sqlite":   {"SELECT sqlite_version()", "3.45.1"},
}

// expectVersion expects database db's version query, answered with v, or where v is empty with
// a version every form accepts.
func expectVersion(m *recorder, db, v string) {
	if v == "" {
		v = versions[db].answer
	}
	m.mock.ExpectQuery(versions[db].query).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(v))
}

// expectNotGalera expects the Galera check the row lock and advisory forms make at Open on
// MySQL and MariaDB, answered as a server without Galera: MySQL has no wsrep_on variable,
// MariaDB has it OFF. The other databases are asked nothing.
func expectNotGalera(m *recorder, db string) {
	if db != "mysql" && db != "mariadb" {
		return
	}
	q := m.mock.ExpectQuery("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")
	if db == "mysql" {
		q.WillReturnRows(sqlmock.NewRows([]string{"Variable_name", "Value"}))
		return
	}
	q.WillReturnRows(sqlmock.NewRows([]string{"Variable_name", "Value"}).AddRow("wsrep_on", "OFF"))
}

// expectInTransaction expects the MariaDB dialect's question, after a statement of the
// handler's failed, whether the transaction still stands; in is the server's answer, 1 or 0.
func expectInTransaction(m *recorder, in int) {
	m.mock.ExpectQuery("SELECT @@in_transaction").WillReturnRows(sqlmock.NewRows([]string{"@@in_transaction"}).AddRow(in))
}

// errDeadlock is the error MySQL and MariaDB give a statement their deadlock detector chose,
// whose whole transaction they have rolled back.
var errDeadlock = errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")

// sqlState is a driver error carrying a SQLSTATE the way pgx's does.
type sqlState struct{ code string }

func (e sqlState) Error() string {
	return "ERROR: could not serialize access due to concurrent update (SQLSTATE " + e.code + ")"
}
func (e sqlState) SQLState() string { return e.code }

// changed is the result of a statement that changed n rows.
func changed(n int64) driver.Result { return sqlmock.NewResult(0, n) }
