// Package formcolumn records, for this process, the columns of tables that a form writes by
// itself and no table description names: the lease form's expiry (lease.Config.Column).
// Publishing (inbox.Enqueue) refuses them in Message.Columns, as it refuses the roles' columns.
// A process that builds no such form over a table records nothing for it.
package formcolumn

import (
	"slices"
	"sync"
)

var taken struct {
	sync.Mutex
	byTable map[string][]string // table name (as described) → its form columns
}

// Add records column as written by a form of the table named table.
func Add(table, column string) {
	taken.Lock()
	defer taken.Unlock()
	if taken.byTable == nil {
		taken.byTable = map[string][]string{}
	}
	if !slices.Contains(taken.byTable[table], column) {
		taken.byTable[table] = append(taken.byTable[table], column)
	}
}

// Of returns the form columns recorded for the table named table.
func Of(table string) []string {
	taken.Lock()
	defer taken.Unlock()
	return slices.Clone(taken.byTable[table])
}
