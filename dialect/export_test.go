package dialect

import (
	"database/sql/driver"
	"io"
)

// RememberedSessions counts the driver connections whose session the package remembers.
func RememberedSessions() int {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	return len(sessions.m)
}

// ValueRows is a query's result of one row of one column, value: the fake drivers of this
// package's tests, inside it and out, answer with it.
func ValueRows(value string) driver.Rows { return &valueRows{value: value} }

type valueRows struct {
	value string
	done  bool
}

func (r *valueRows) Columns() []string { return []string{"value"} }
func (r *valueRows) Close() error      { return nil }

func (r *valueRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = r.value
	return nil
}
