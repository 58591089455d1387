// Package sqlitewriter holds the lock per SQLite database (per *sql.DB) that this process's
// library writes outside a handler's transaction take: the lease form's claims and settlements,
// and Enqueue. SQLite lets one connection write at a time, and a writer that finds the database
// locked sleeps in the busy handler, in steps that grow to 100 ms, however soon the lock is
// free: writes of one process that queue here instead run back to back. Writers in other
// processes still meet the busy timeout.
package sqlitewriter

import (
	"database/sql"
	"sync"
)

var writers sync.Map // *sql.DB → *sync.Mutex

// For returns the writer lock of db.
func For(db *sql.DB) *sync.Mutex {
	mu, _ := writers.LoadOrStore(db, &sync.Mutex{})
	return mu.(*sync.Mutex)
}
