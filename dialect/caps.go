package dialect

// Caps is what a database can do and how it is spoken to, as values: the answer to every
// question the forms and the statement builders (internal/sqltext) would otherwise ask of a
// dialect's name. Each database has one record, shared by its levels and modes, and returned by
// its dialect's Caps method; it is never to be modified. The level-dependent facts are sets of
// levels, as Dialect.Level gives them.
type Caps struct {
	// Title is the database's name in messages: Postgres, MySQL, MariaDB, SQLite.
	Title string

	// Quote is the identifier quote: '"' on Postgres, '`' on MySQL, MariaDB and SQLite. Every
	// name is written inside it with inner quotes doubled (Dialect.Quote).
	Quote byte
	// MaxNameBytes is the longest name the database keeps, counted in bytes: 63 on Postgres
	// (NAMEDATALEN - 1). Zero where names are not limited in bytes.
	MaxNameBytes int
	// MaxNameChars is the longest name the database keeps, counted in characters: 64 on MySQL
	// and MariaDB. Zero where names are not limited in characters. With both limits zero
	// (SQLite) Dialect.Quote refuses no name for its length.
	MaxNameChars int
	// NumberedParams says statement parameters are numbered, $1, $2, … (Postgres); elsewhere
	// each is a ?. Every statement builder numbers its parameters by it (Dialect.Placeholder).
	NumberedParams bool
	// TimeLayout is the text a timestamp is bound and stored as, where it is text:
	// SQLiteTimeLayout on SQLite, whose text order is then time order. Empty where a timestamp
	// is bound as a time.Time, in UTC, to the microsecond (Dialect.Time).
	TimeLayout string

	// IDOnlyValue is what an INSERT writes for a generated id when the table has no other
	// column to write: DEFAULT, or NULL on SQLite, whose VALUES take no DEFAULT and which
	// assigns the rowid for a NULL. Publishing (inbox.Enqueue) writes it.
	IDOnlyValue string
	// ValuesDefault says a row of an INSERT's VALUES may write DEFAULT for a column, which then
	// takes its default as if the INSERT left it out (Postgres, MySQL, MariaDB; not SQLite).
	// Publishing (inbox.Enqueue) then writes messages that set different own columns in one
	// INSERT, DEFAULT where a message leaves a column out; elsewhere in an INSERT per run of
	// messages that set the same columns.
	ValuesDefault bool
	// NullsLast says ascending order sorts NULL after every value (Postgres), so the claim
	// order, which takes a row never delayed (retry_after NULL) before a delayed one, says
	// NULLS FIRST; MySQL, MariaDB and SQLite sort NULL first by themselves. Every claim's
	// ORDER BY (internal/stmt Order).
	NullsLast bool
	// Returning says UPDATE and DELETE take a RETURNING clause (Postgres; SQLite since 3.35;
	// not MySQL, and not MariaDB, whose UPDATE has none). The lease form's merged settlements
	// return the ids they changed by it, and the advisory form's take returns its row in the
	// UPDATE that counts the attempt.
	Returning bool
	// UpdateFrom says an UPDATE joins a WITH query by FROM and returns the rows it changed
	// (Postgres), so the lease form's claim picks its rows (SKIP LOCKED) and stamps them in
	// one statement. Elsewhere the claim is a pick and then a stamp over the ids it read.
	UpdateFrom bool
	// SkipLocked says SELECT … FOR UPDATE SKIP LOCKED passes over the rows other transactions
	// lock (Postgres, MySQL, MariaDB). The row lock form needs it; the lease form's pick uses it
	// where there is one. SQLite, with one writer, has no row locks.
	SkipLocked bool
	// ConcatOperator says text is joined with || (Postgres, SQLite); elsewhere with CONCAT(…),
	// since MySQL and MariaDB read || as OR. The advisory form's key expression.
	ConcatOperator bool
	// TextType is the type a value is cast to for its text: TEXT, or CHAR on MySQL and
	// MariaDB, whose CAST knows no TEXT. The advisory form's key expression, and the keys its
	// batch unlock lists on Postgres.
	TextType string
	// Strings is how a string literal is spelled so that the server reads it back as the
	// string whatever the session's settings (Caps.Literal): the kinds a claim names.
	Strings StringStyle

	// Locks is the database's family of session advisory locks: what the advisory form locks,
	// unlocks and probes a key with. NoSessionLocks (SQLite) means the advisory form does not
	// run.
	Locks LockFamily
	// LockNameMaxChars is the longest lock name NamedLocks take (64 on MySQL and MariaDB): the
	// advisory form locks a longer database-scoped key by its SHA-1 (40 hex digits) instead.
	// Zero for the other families.
	LockNameMaxChars int

	// OneWriter says one connection writes at a time (SQLite): concurrent writers only wait
	// for each other. The lease form then claims serially (one claim in flight per consumer,
	// Plan.SerialClaims; one row at a time in transactional mode), queues the process's writes
	// on one lock per *sql.DB, claims with a SELECT then an UPDATE in a transaction begun
	// BEGIN IMMEDIATE (no other writer can take the rows between the two), extends a lease
	// inside the delivery's transaction where there is one (that transaction may hold the write
	// lock), and settles a lone worker's row and claims its next in one transaction.
	OneWriter bool
	// BeginsByStatement says the dialect's transactions begin with a BEGIN statement on a
	// pinned connection, since no sql.TxOptions expresses its modes (SQLite: BEGIN DEFERRED,
	// IMMEDIATE, EXCLUSIVE): statements prepared on the pool cannot run in its transactions
	// (Tx.StmtContext returns nil) and run by their text there, and TxOptions has no options to give.
	// Elsewhere a transaction is an *sql.Tx on a pinned connection. The lease form's claim on SQLite (its
	// statements are prepared at Open only to check them) and its ack inside the handler's
	// transaction.
	BeginsByStatement bool
	// DefaultReadCommitted says a transaction at the dialect's default level opens READ
	// COMMITTED (MySQL and MariaDB, whose own default is REPEATABLE READ); elsewhere the
	// default is a plain BEGIN at the database's default. Dialect.Begin, and TxOptions for the
	// advisory form's transactions on its pinned connection.
	DefaultReadCommitted bool
	// SessionLevelQueries read the level a session opens its transactions at, where a
	// transaction that sets its own costs a statement more (MySQL, MariaDB: go-sql-driver/mysql
	// sends SET TRANSACTION ISOLATION LEVEL before START TRANSACTION): the first the server
	// answers without an unknown variable (error 1193), the variable being transaction_isolation
	// on MySQL 8 and MariaDB 11.1 and later, tx_isolation on MariaDB. A transaction at its
	// session's level begins without the SET (Dialect.Begin, BeginOn). Empty where a transaction
	// names its level in its BEGIN (Postgres) or begins by statement (SQLite).
	SessionLevelQueries []string
	// IDListSettles says a batch's rows of one outcome settle in one statement over an
	// id IN (…) list inside the transaction that holds their row locks (Postgres). On InnoDB
	// (MySQL, MariaDB) the optimizer may take such a list through a scan that locks every row
	// it reads and waits for the rows other batches hold, so the row lock form settles a batch
	// there with one statement per row on its id.
	IDListSettles bool
	// InListTempIndex says x IN ('a', 'b', 'c', …) of more than two values builds a temporary
	// index of the values at every run of the statement (SQLite: an ephemeral table, one
	// insert per value; two values or fewer are compared in turn), which with 50 values cost a
	// claim's pick four times the pick without them (docs/benchmarks.md, issue 24). A consumer
	// of kinds then looks a row's kind up in one string literal of its kinds instead
	// (internal/sqltext OfKinds).
	InListTempIndex bool
	// LazyCompile says the driver compiles a statement only when it first runs, so preparing
	// one does not find a missing table or column (SQLite): preparing at startup
	// (internal/stmt Prepare) has the statement compiled by EXPLAIN as well.
	LazyCompile bool

	// SnapshotLevels are the levels at which a transaction reads, and its writes find their
	// rows, by the snapshot its first statement took (Postgres: repeatable read,
	// serializable). The lease form refuses transactional mode at them: the handler's
	// transaction would not see the lease extended, and its Ack would find the lease lost.
	SnapshotLevels []Level
	// PredicateLockLevels are the levels at which a COMMIT fails with a serialization failure
	// when rows the transaction read were changed by another transaction meanwhile (Postgres:
	// serializable, whose predicate locks cover what a claim's scan read). The row lock form's
	// settlements then fail whenever another worker settled a row the claim met, and its rows
	// are delivered again: Open warns.
	PredicateLockLevels []Level

	// Server is the oldest server the library runs on (Dialect.CheckServer refuses an older
	// one with inbox.ErrServerTooOld): Postgres 9.5, MySQL 8.0.1 and MariaDB 10.6 (SKIP
	// LOCKED), SQLite 3.35 (RETURNING). A MariaDB server of at least 10.6 also runs the MySQL
	// dialect.
	Server Floor
	// Advisory is the oldest server the advisory form runs on, where that is newer than
	// Server: Postgres 11 (hashtextextended). Zero where Server suffices or the form does not
	// run.
	Advisory Floor

	// StatementLostCodes are the SQLSTATE codes with which a server refuses a prepared
	// statement of the connection's own rather than the statement's text: 26000 (it does not
	// exist) and 42P05 (it exists already) on Postgres, which a pooler in transaction mode
	// causes when it moves a client to another server connection (PgBouncer before 1.21).
	// Preparing (internal/stmt Prepare) reports them as the connection's failure, not as the
	// schema's.
	StatementLostCodes []string

	// Notifies says the database delivers a notification sent inside a transaction to its
	// listeners when that transaction commits (Postgres: pg_notify, LISTEN): publishing to a
	// table with inbox.Table.Notify set sends one. Elsewhere Notify is ignored.
	Notifies bool

	// ClockQuery reads the server's clock, in UTC, as text of the layout
	// "2006-01-02 15:04:05.999999" (SQLite's to the millisecond): what inbox.DatabaseClock
	// measures its offset by.
	ClockQuery string

	// ConflictCodes are the SQLSTATE codes of the transient conflicts worth running a
	// statement again for, as a driver's error reports them by a SQLState method (pgx,
	// lib/pq): 40001 (serialization failure) and 40P01 (deadlock) on Postgres. Empty where the
	// drivers expose no SQLSTATE.
	ConflictCodes []string
	// ConflictMarks are the same conflicts as the drivers' error texts name them: "SQLSTATE
	// 40001" and "SQLSTATE 40P01" on Postgres; "Error 1213" (deadlock) and "Error 1205" (lock
	// wait timeout) on MySQL and MariaDB; "SQLITE_BUSY" and "database is locked" on SQLite.
	// Dialect.Retryable recognises these codes and marks, and no others; the forms run a
	// conflicted claim, or a guarded statement, again.
	ConflictMarks []string
	// ConflictTries bounds how often a form runs a claim or a guarded statement that keeps
	// meeting such conflicts, in all: 10 on the servers, whose conflicts end at once (a
	// deadlock, a certification failure) or after a lock wait the claim's SKIP LOCKED keeps
	// short; 5 on SQLite, where each SQLITE_BUSY has waited out the busy timeout already.
	ConflictTries int

	// Catalog is how the database describes its tables and which types it has: what the schema
	// checks (Open, inbox schema -check) read a table's columns and indexes from, the type rules
	// they judge each column by, and the types the DDL they print is written in. A database
	// that speaks another's catalog takes its value (CockroachDB and YugabyteDB Postgres's, TiDB
	// MySQL's).
	Catalog Catalog
	// PartialIndexes says an index may cover only the rows a WHERE clause selects (Postgres,
	// SQLite): the claim index then covers the rows neither processed nor dead. Elsewhere the
	// index leads with processed_at and dead_at, which the claim asks to be NULL, and the DDL
	// declares it inside CREATE TABLE.
	PartialIndexes bool
	// InsertValues bounds the values one multi-row INSERT of a publish binds; 0 leaves the
	// bound to the rows (1,000 a statement). SQLite's Go drivers bind each parameter by
	// looking its argument up from the start of the list, so a statement's cost grows with the
	// square of its values: 100 rows of six values published 2.4× faster than 1,000
	// (docs/benchmarks.md, "Publishing"). The statements of a publish share one transaction,
	// so more of them change nothing of all or nothing.
	InsertValues int
	// UpsertNothing says an INSERT takes ON CONFLICT (column) DO NOTHING, which passes over a
	// row whose unique key another row holds (Postgres, SQLite): a publish of a message with a
	// unique key (inbox.Message.UniqueKey) is one statement that inserts or does nothing.
	// Elsewhere (MySQL, MariaDB) the publish is a plain INSERT, and a duplicate-key error on the
	// unique key's index (DuplicateOn) says another row holds the key; INSERT IGNORE, which would
	// pass over unrelated errors too, is never used.
	UpsertNothing bool
	// HolderLock is the locking clause of the read of the row that holds a unique key, after an
	// INSERT found the key taken: " LOCK IN SHARE MODE" on MySQL and MariaDB, where a plain read
	// in a REPEATABLE READ transaction reads its snapshot and may miss a holder committed since,
	// and where a shared lock read through the covering unique index locks that index's record
	// only, so it does not wait for a consumer's FOR UPDATE on the row. Empty elsewhere.
	HolderLock string
	// CaseSensitiveNames says two quoted names that differ only in case name two columns
	// (Postgres); elsewhere they name one, and the catalog is searched without regard to case.
	CaseSensitiveNames bool
	// NoPadBinary is the utf8mb4 collation that compares text byte for byte, trailing spaces
	// included (MariaDB's utf8mb4_nopad_bin), which the DDL declares on the text columns the
	// library compares by key (internal/sqltext.KeyText). Empty where the database has none
	// that every server of the dialect knows: MySQL's utf8mb4_0900_bin came in 8.0.17 and
	// MariaDB, which runs the MySQL dialect too, lacks it, so the DDL declares those columns
	// VARBINARY there; and on Postgres and SQLite, whose default collations compare exactly.
	NoPadBinary string

	// Clusters says the server may be a node of a Galera cluster (MySQL and MariaDB with the
	// wsrep provider: MariaDB Galera Cluster, Percona XtraDB Cluster), whose row locks and
	// GET_LOCK locks are each node's own: Galera asks the server, and CheckGalera refuses the
	// forms that hold rows by those locks.
	Clusters bool

	// Durability per statement.

	// UnflushedCommit is a condition, always true, that a statement's WHERE clause carries so
	// that the transaction it runs in commits without waiting for the disk: on Postgres
	// (SELECT set_config('synchronous_commit', 'off', true)) = 'off', which turns
	// synchronous_commit off for that transaction alone (an autocommit statement's own; a
	// pooler in transaction mode keeps it to the transaction too). The server evaluates the
	// uncorrelated subquery once, before it reads a row (an InitPlan in a one-time filter), so
	// a statement that matches no row sets it as well. A server crash may then forget the
	// commit, unless a later commit waited for the disk (the log is one sequence).
	// The lease form's claims and extensions and the advisory form's take carry it, and every
	// form's acks outside transactional mode where inbox.Binding.UnflushedAcks asks (internal/sqltext
	// Lease, Advisory, RowLock). Empty where durability is not set per transaction: MySQL and
	// MariaDB (innodb_flush_log_at_trx_commit is the server's), SQLite (synchronous is the
	// connection's).
	UnflushedCommit string
}

// LockFamily is a database's kind of session advisory locks.
type LockFamily uint8

const (
	// NoSessionLocks: the database has none (SQLite).
	NoSessionLocks LockFamily = iota
	// HashedLocks are Postgres's: a key is hashed to 64 bits (hashtextextended(key, 0)) and
	// locked with pg_try_advisory_lock, released with pg_advisory_unlock; a key held elsewhere
	// is found by pg_try_advisory_xact_lock_shared failing. Locks span the database.
	HashedLocks
	// NamedLocks are MySQL's and MariaDB's: a key, prefixed with DATABASE() and a dot (locks
	// span the server), is locked by name with GET_LOCK and released with RELEASE_LOCK; a key
	// held elsewhere is found by IS_USED_LOCK. A name over LockNameMaxChars is replaced by its
	// SHA-1.
	NamedLocks
)

// Catalog is a family of database catalogs and type systems (Caps.Catalog).
type Catalog uint8

const (
	// PostgresCatalog: pg_catalog, and Postgres's types (BIGINT, BYTEA, TIMESTAMPTZ, …).
	PostgresCatalog Catalog = iota + 1
	// MySQLCatalog: information_schema, and MySQL's types (BIGINT, LONGBLOB, DATETIME(6), …),
	// which MariaDB shares.
	MySQLCatalog
	// SQLiteCatalog: the table_info and index_list pragmas, and SQLite's type affinities and
	// STRICT tables.
	SQLiteCatalog
)

// StringStyle is a database's spelling of a string literal that reads the same under every
// setting of the session (Caps.Strings, Caps.Literal).
type StringStyle uint8

const (
	// StandardStrings: '…', each quote doubled; a backslash is itself (SQLite).
	StandardStrings StringStyle = iota
	// EscapeStrings: '…', each quote doubled, or, for a string that holds a backslash, E'…',
	// each quote and each backslash doubled (Postgres). An escape string reads a backslash as
	// an escape whatever standard_conforming_strings says, where '…' would read it by that
	// setting.
	EscapeStrings
	// HexStrings: '…', each quote doubled, or, for a string that holds a backslash or a NUL
	// byte, _utf8mb4 X'…' of its bytes (MySQL, MariaDB). '…' reads a backslash as an escape
	// unless sql_mode has NO_BACKSLASH_ESCAPES; a hex string with its character set reads
	// alike in every mode, and compares by the column's collation as a quoted one does.
	HexStrings
)

// Floor is the oldest release of a database that runs something, and what that release
// brought.
type Floor struct {
	Major, Minor, Patch int
	// Needs names what the release brought, for messages: "SKIP LOCKED", "RETURNING",
	// "hashtextextended".
	Needs string
}

// The records of the four databases.
var (
	postgresCaps = Caps{
		Title:               "Postgres",
		Quote:               '"',
		MaxNameBytes:        63,
		NumberedParams:      true,
		IDOnlyValue:         "DEFAULT",
		ValuesDefault:       true,
		NullsLast:           true,
		Returning:           true,
		UpdateFrom:          true,
		SkipLocked:          true,
		ConcatOperator:      true,
		TextType:            "TEXT",
		Strings:             EscapeStrings,
		Locks:               HashedLocks,
		IDListSettles:       true,
		SnapshotLevels:      []Level{LevelRepeatableRead, LevelSerializable},
		PredicateLockLevels: []Level{LevelSerializable},
		Server:              Floor{9, 5, 0, "SKIP LOCKED"},
		Advisory:            Floor{11, 0, 0, "hashtextextended"},
		StatementLostCodes:  []string{"26000", "42P05"},
		Notifies:            true,
		ClockQuery:          "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
		ConflictCodes:       []string{"40001", "40P01"},
		ConflictMarks:       []string{"SQLSTATE 40001", "SQLSTATE 40P01"},
		ConflictTries:       10,
		Catalog:             PostgresCatalog,
		PartialIndexes:      true,
		UpsertNothing:       true,
		CaseSensitiveNames:  true,
		UnflushedCommit:     "(SELECT set_config('synchronous_commit', 'off', true)) = 'off'",
	}
	mysqlCaps = mysqlFamilyCaps("MySQL", Floor{8, 0, 1, "SKIP LOCKED"},
		"SELECT @@SESSION.transaction_isolation", "SELECT @@SESSION.tx_isolation")
	mariadbCaps = func() Caps {
		c := mysqlFamilyCaps("MariaDB", Floor{10, 6, 0, "SKIP LOCKED"},
			"SELECT @@SESSION.tx_isolation", "SELECT @@SESSION.transaction_isolation")
		c.NoPadBinary = "utf8mb4_nopad_bin"
		return c
	}()
	sqliteCaps = Caps{
		Title:             "SQLite",
		Quote:             '`',
		TimeLayout:        SQLiteTimeLayout,
		IDOnlyValue:       "NULL",
		Returning:         true,
		ConcatOperator:    true,
		TextType:          "TEXT",
		Locks:             NoSessionLocks,
		OneWriter:         true,
		BeginsByStatement: true,
		IDListSettles:     true,
		LazyCompile:       true,
		InListTempIndex:   true,
		Server:            Floor{3, 35, 0, "RETURNING"},
		ClockQuery:        "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
		ConflictMarks:     []string{"SQLITE_BUSY", "database is locked"},
		ConflictTries:     5,
		Catalog:           SQLiteCatalog,
		PartialIndexes:    true,
		UpsertNothing:     true,
		InsertValues:      1000,
	}
)

// mysqlFamilyCaps is the record of MySQL and MariaDB, which differ in their name, their oldest
// server and the variable they read a session's level from first (the MySQL dialect runs on
// MariaDB too).
func mysqlFamilyCaps(title string, server Floor, sessionLevelQueries ...string) Caps {
	return Caps{
		Title:                title,
		Quote:                '`',
		MaxNameChars:         64,
		IDOnlyValue:          "DEFAULT",
		ValuesDefault:        true,
		SkipLocked:           true,
		TextType:             "CHAR",
		Strings:              HexStrings,
		Locks:                NamedLocks,
		LockNameMaxChars:     64,
		DefaultReadCommitted: true,
		SessionLevelQueries:  sessionLevelQueries,
		Server:               server,
		ClockQuery:           "SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')",
		ConflictMarks:        []string{"Error 1213", "Error 1205"},
		ConflictTries:        10,
		Catalog:              MySQLCatalog,
		Clusters:             true,
		HolderLock:           " LOCK IN SHARE MODE",
	}
}

// Caps returns the record of Postgres.
func (postgres) Caps() *Caps { return &postgresCaps }

// Caps returns the record of MySQL.
func (mysql) Caps() *Caps { return &mysqlCaps }

// Caps returns the record of MariaDB.
func (mariadb) Caps() *Caps { return &mariadbCaps }

// Caps returns the record of SQLite.
func (sqlite) Caps() *Caps { return &sqliteCaps }
