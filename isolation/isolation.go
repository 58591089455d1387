// Package isolation holds the markers that name the isolation level (or, on SQLite, the
// transaction mode) a dialect opens the transactions of a delivery's work at.
//
// A marker is a type argument, never a value you inspect:
//
//	dialect.Postgres[isolation.ReadCommitted]{}
//	dialect.SQLite[isolation.Immediate]{}
//
// Each dialect constrains its type parameter to the markers its database opens (see the
// dialect package), so a pair the database cannot run does not compile.
package isolation

// Default declares nothing: Postgres and SQLite open a plain BEGIN (the database's default
// level), MySQL and MariaDB open READ COMMITTED.
type Default struct{}

// ReadUncommitted opens READ UNCOMMITTED (MySQL and MariaDB only: Postgres runs it as read
// committed, so its dialect does not open it).
type ReadUncommitted struct{}

// ReadCommitted opens READ COMMITTED (Postgres, MySQL, MariaDB).
type ReadCommitted struct{}

// RepeatableRead opens REPEATABLE READ (Postgres, MySQL, MariaDB).
type RepeatableRead struct{}

// Serializable opens SERIALIZABLE (Postgres, MySQL, MariaDB).
type Serializable struct{}

// Deferred opens SQLite transactions with BEGIN DEFERRED: the write lock is taken at the first
// write.
type Deferred struct{}

// Immediate opens SQLite transactions with BEGIN IMMEDIATE: the write lock is taken when the
// transaction begins, so no other writer runs between its reads and its writes.
type Immediate struct{}

// Exclusive opens SQLite transactions with BEGIN EXCLUSIVE: like Immediate, and in rollback
// journal modes readers are kept out too.
type Exclusive struct{}
