package integration

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
)

// backend is one database the suite runs on, under one dialect at its default level.
type backend struct {
	name    string // "postgres", "mysql" (a MariaDB server under the MySQL dialect), "mariadb", "sqlite"
	dialect dialect.Dialect
	driver  string
	dsn     string
}

// backends lists every database × dialect cell; forms that do not run on SQLite pass sqlite=false.
func backends(t *testing.T, sqlite bool) []backend {
	t.Helper()
	servers := startServers(t)
	bs := []backend{
		backendNamed("postgres", servers.postgres),
		backendNamed("mysql", servers.mysql),
		backendNamed("mariadb", servers.mariadb),
	}
	if sqlite {
		bs = append(bs, backendNamed("sqlite", ""))
	}
	return bs
}

// onlyBackends lists the backends of the given names, in the order backends lists them.
func onlyBackends(t *testing.T, names ...string) []backend {
	t.Helper()
	var bs []backend
	for _, b := range backends(t, true) {
		if slices.Contains(names, b.name) {
			bs = append(bs, b)
		}
	}
	return bs
}

// forEachBackend runs run on each of bs, one after the other, each as a subtest named for it.
func forEachBackend(t *testing.T, bs []backend, run func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) { run(t, b) })
	}
}

// backendNamed is the backend of the given name at its default level, on dsn.
func backendNamed(name, dsn string) backend {
	for _, b := range []backend{
		{"postgres", dialect.Postgres[isolation.Default]{}, "pgx", dsn},
		{"mysql", dialect.MySQL[isolation.Default]{}, "mysql", dsn},
		{"mariadb", dialect.MariaDB[isolation.Default]{}, "mysql", dsn},
		{"sqlite", dialect.SQLite[isolation.Default]{}, "sqlite", dsn},
	} {
		if b.name == name {
			return b
		}
	}
	panic("no backend " + name)
}

// testDSN returns a DSN of the backend's database: the server's, or a new SQLite file of the
// test's.
func (b backend) testDSN(t *testing.T) string {
	if b.name == "sqlite" {
		return SQLiteDSN(filepath.Join(t.TempDir(), "inbox.db"))
	}
	return b.dsn
}

// open opens the backend's database for one test, with a pool of poolSize (0: 16), closed when
// the test ends. SQLite gets a new file in WAL mode with a busy timeout.
func (b backend) open(t *testing.T, poolSize int) *sql.DB {
	t.Helper()
	if poolSize == 0 {
		poolSize = 16
	}
	return b.openDSN(t, b.testDSN(t), poolSize)
}

// openDBs opens n pools of pool connections on one database of the backend (one SQLite file for
// all), as n processes would have.
func (b backend) openDBs(t *testing.T, n, pool int) []*sql.DB {
	t.Helper()
	dsn := b.testDSN(t)
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		dbs[i] = b.openDSN(t, dsn, pool)
	}
	return dbs
}

// openDSN opens a pool of pool connections on dsn, closed when the test ends. A database that
// does not answer skips the test, or fails it where INBOX_REQUIRE_DATABASES=1.
func (b backend) openDSN(t *testing.T, dsn string, pool int) *sql.DB {
	t.Helper()
	if dsn == "" {
		skipShort(t, b.name+"'s server")
		skipOrFail(t, b.name+": no server")
	}
	db, err := sql.Open(b.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		skipOrFail(t, fmt.Sprintf("%s unreachable at %s: %v", b.name, dsn, err))
	}
	return db
}

// openTable opens the backend's database as open does and creates on it the table newTable
// describes, named for the test.
func (b backend) openTable(t *testing.T, poolSize int, newTable func(name string) inbox.Table) (*sql.DB, inbox.Table) {
	t.Helper()
	db := b.open(t, poolSize)
	return db, b.newTable(t, db, newTable)
}

// newTable creates on db the table newTable describes, named for the test, as createTable does,
// and returns it.
func (b backend) newTable(t *testing.T, db *sql.DB, newTable func(name string) inbox.Table) inbox.Table {
	t.Helper()
	tbl := newTable(tableName(t))
	b.createTable(t, db, tbl)
	return tbl
}

// SQLiteDSN is the DSN of a SQLite file in WAL mode with a 15 s busy timeout: under -race the
// pure-Go driver runs many times slower, and a statement of one pool, polling for the lock that
// the claims of the test's other pools take in turn, waited out 5 s on a loaded machine
// (SQLITE_BUSY from a SetLimit in TestLimitsChangedAtRunTime).
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(15000)&_pragma=synchronous(NORMAL)"
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("INBOX_REQUIRE_DATABASES") == "1" {
		t.Fatalf("database required (INBOX_REQUIRE_DATABASES=1): %s", why)
	}
	t.Skip(why)
}

// skipShort skips the test under -short (make test/short), which takes SQLite's cells only:
// what needs names the server or the run the test would start.
func skipShort(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short takes SQLite's cells only (make test/short); make test takes " + what)
	}
}

// tableName is a table name of the test's own, short enough for every database. It carries the
// process id, so that two test processes on one server never share a table.
func tableName(t *testing.T) string {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return fmt.Sprintf("inbox_%d_%x", os.Getpid(), h.Sum64())
}

// fullTable describes a table with every role (and the lease's locked_until column).
func fullTable(name string) inbox.Table {
	return inbox.Table{
		Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		ProcessedAt: "processed_at", Queue: "grp", Priority: "priority",
		RetryAfter: "retry_after", Headers: "headers",
	}
}

// kindTable describes a table with every role, the failure lifecycle's columns and a kind
// column, which holds jobs of many kinds (inbox.Kinds).
func kindTable(name string) inbox.Table {
	tbl := deadTable(name)
	tbl.Kind = "kind"
	return tbl
}

// deadTable describes a table with every role and the failure lifecycle's columns, which keep
// dead rows (dead_at) and why they died (last_error), as admin.Schema creates it (with the
// lease column locked_until).
func deadTable(name string) inbox.Table {
	tbl := fullTable(name)
	tbl.DeadAt, tbl.LastError = "dead_at", "last_error"
	return tbl
}

// minimalTable describes a table with an id and a payload only.
func minimalTable(name string) inbox.Table {
	return inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload"}
}

// givenIDs describes the table newTable describes, but with ids the publisher gives, none
// generated.
func givenIDs(newTable func(name string) inbox.Table) func(name string) inbox.Table {
	return func(name string) inbox.Table {
		tbl := newTable(name)
		tbl.IDGenerated = false
		return tbl
	}
}

// columnTypes are the types createTable gives the roles' columns on one backend.
type columnTypes struct {
	id      string // a generated id (an explicit one is BIGINT PRIMARY KEY everywhere)
	payload string
	number  string // attempt and priority
	time    string // processed_at, retry_after, dead_at and the lease's locked_until
	queue   string
	text    string // headers and last_error
}

func (b backend) columnTypes() columnTypes {
	switch b.name {
	case "postgres":
		return columnTypes{"BIGSERIAL PRIMARY KEY", "BYTEA", "INT NOT NULL DEFAULT 0", "TIMESTAMPTZ", "TEXT NOT NULL DEFAULT ''", "TEXT"}
	case "sqlite":
		return columnTypes{"INTEGER PRIMARY KEY", "BLOB", "INT NOT NULL DEFAULT 0", "TEXT", "TEXT NOT NULL DEFAULT ''", "TEXT"}
	}
	// The queue and kind compare byte for byte, as inbox schema declares them (sqltext.KeyText).
	queue := sqltext.KeyText(b.dialect.Caps(), 191) + " NOT NULL DEFAULT ''"
	return columnTypes{"BIGINT AUTO_INCREMENT PRIMARY KEY", "LONGBLOB", "INT NOT NULL DEFAULT 0", "DATETIME(6) NULL", queue, "TEXT"}
}

// createTable creates (anew) the table t describes on the backend, with a locked_until column
// for the lease form, and drops it when the test ends.
func (b backend) createTable(t *testing.T, db *sql.DB, tbl inbox.Table) {
	t.Helper()
	ty := b.columnTypes()
	id := ty.id
	if !tbl.IDGenerated {
		id = "BIGINT PRIMARY KEY"
	}
	cols := []string{b.q(t, tbl.ID) + " " + id}
	add := func(name, typ string) {
		if name != "" {
			cols = append(cols, b.q(t, name)+" "+typ)
		}
	}
	add(tbl.Payload, ty.payload)
	add(tbl.Attempt, ty.number)
	add(tbl.ProcessedAt, ty.time)
	add(tbl.Queue, ty.queue)
	add(tbl.Kind, ty.queue)
	add(tbl.Priority, ty.number)
	add(tbl.RetryAfter, ty.time)
	add(tbl.Headers, ty.text)
	add(tbl.DeadAt, ty.time)
	add(tbl.LastError, ty.text)
	add(tbl.CancelledAt, ty.time)
	add("locked_until", ty.time)
	b.scratchTable(t, db, tbl.Name, strings.Join(cols, ", "))
	if b.name == "mysql" || b.name == "mariadb" {
		// The claim index the README documents: the claim's equality columns first (group, and
		// processed_at IS NULL), then the claim order, so a claim reads only its queue's
		// pending rows and locks no others; then the kind, which a claim of kinds tests on the
		// index entry (schema.ClaimIndex).
		var order []string
		for _, c := range []string{tbl.Queue, tbl.ProcessedAt, tbl.Priority, tbl.RetryAfter, tbl.ID, tbl.Kind} {
			if c != "" {
				order = append(order, b.q(t, c))
			}
		}
		mustExec(t, db, "CREATE INDEX "+b.q(t, tbl.Name+"_claim")+" ON "+b.q(t, tbl.Name)+" ("+strings.Join(order, ", ")+")")
	}
}

// scratchTable creates (anew) table name with the columns given as CREATE TABLE takes them, drops
// it when the test ends, and returns its quoted name.
func (b backend) scratchTable(t *testing.T, db *sql.DB, name, columns string) string {
	t.Helper()
	quoted := b.q(t, name)
	drop := "DROP TABLE IF EXISTS " + quoted
	mustExec(t, db, drop)
	mustExec(t, db, "CREATE TABLE "+quoted+" ("+columns+")")
	t.Cleanup(func() { db.Exec(drop) })
	return quoted
}

// q quotes an identifier for the backend's database.
func (b backend) q(t testing.TB, ident string) string {
	t.Helper()
	s, err := b.dialect.Quote(ident)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// placeholders lists the backend's first n statement parameters, comma-separated.
func (b backend) placeholders(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = b.dialect.Placeholder(i + 1)
	}
	return strings.Join(ps, ", ")
}

// enqueue publishes msgs to tbl, failing the test on an error.
func (b backend) enqueue(t testing.TB, db *sql.DB, tbl inbox.Table, msgs ...inbox.Message) {
	t.Helper()
	if err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, msgs...); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}

// enqueueTx publishes msgs to tbl in a transaction of db and commits it, or rolls it back,
// failing the test on an error. EnqueueTx wakes no consumer in this process: only the
// database's notification (or a poll) can.
func (b backend) enqueueTx(t testing.TB, db *sql.DB, tbl inbox.Table, commit bool, msgs ...inbox.Message) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.EnqueueTx(context.Background(), tx, b.dialect, tbl, msgs...); err != nil {
		t.Fatal(err)
	}
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// beginWith begins a transaction of d on db and runs stmts in it, failing the test on an error.
func beginWith(t testing.TB, ctx context.Context, d dialect.Dialect, db *sql.DB, stmts ...string) dialect.Tx {
	t.Helper()
	tx, err := d.Begin(ctx, db)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return tx
}

// messages returns n messages of queue q with the payloads "m1", "m2", …
func messages(q string, n int) []inbox.Message {
	msgs := make([]inbox.Message, n)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: q, Payload: fmt.Appendf(nil, "m%d", i+1)}
	}
	return msgs
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), query, args...)
	// Postgres may refuse one of two CREATE … IF NOT EXISTS of one name run at once (tests
	// side by side creating a shared side table, inbox_groups): the other created it.
	for try := 0; err != nil && strings.Contains(query, " IF NOT EXISTS ") && concurrentCreate(err) && try < 5; try++ {
		time.Sleep(10 * time.Millisecond)
		_, err = db.ExecContext(context.Background(), query, args...)
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// concurrentCreate reports whether err is Postgres's refusal of a CREATE that raced another
// of the same name (a unique violation in its catalog, or the name already there).
func concurrentCreate(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "duplicate key value violates unique constraint") || strings.Contains(msg, "already exists")
}

// count returns the single integer query answers.
func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// countRows counts the rows of tbl on db that satisfy where, with args (every row, where where
// is empty), failing the test on an error.
func (b backend) countRows(t *testing.T, db *sql.DB, tbl inbox.Table, where string, args ...any) int {
	t.Helper()
	query := "SELECT COUNT(*) FROM " + b.q(t, tbl.Name)
	if where != "" {
		query += " WHERE " + where
	}
	return count(t, db, query, args...)
}

// querier runs a query: a pool, a connection or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// forRows runs query with args on db and, for each row it returns, scans the row into dest and
// calls row; an error fails the test.
func forRows(t testing.TB, db querier, query string, args []any, row func(), dest ...any) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		row()
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// column returns the values of the one column query with args answers, row by row, failing the
// test on an error.
func column[T any](t testing.TB, db querier, query string, args ...any) []T {
	t.Helper()
	var (
		v   T
		out []T
	)
	forRows(t, db, query, args, func() { out = append(out, v) }, &v)
	return out
}

var serversOnce struct {
	sync.Once
	s servers
}

type servers struct{ postgres, mysql, mariadb string }

// startServers returns the DSNs of the servers: containers started through dockertest when a
// Docker engine answers, the environment's (or the defaults) otherwise. Under -short (make
// test/short) there are none, whatever the environment says.
func startServers(t *testing.T) servers {
	serversOnce.Do(func() {
		if testing.Short() {
			return // no servers: their cells skip, and SQLite's run (make test/short)
		}
		if s, ok := dockerServers(); ok {
			serversOnce.s = s
			return
		}
		s := servers{
			postgres: envOr("INBOX_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
			mysql:    envOr("INBOX_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test"),
		}
		s.mariadb = envOr("INBOX_MARIADB_DSN", s.mysql)
		serversOnce.s = s
	})
	return serversOnce.s
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
