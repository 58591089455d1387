package dialect_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestTxEnded: which errors end a transaction, by dialect, and what each asks the server.
func TestTxEnded(t *testing.T) {
	deadlock := errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")
	timeout := errors.New("Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction")
	duplicate := errors.New("Error 1062 (23000): Duplicate entry '1' for key 'PRIMARY'")
	const rollbackOnTimeout, inTransaction = "SELECT @@innodb_rollback_on_timeout", "SELECT @@in_transaction"
	gone := errors.New("connection reset")
	tests := []struct {
		name    string
		d       dialect.Dialect
		err     error
		answers map[string]string
		fail    map[string]error
		want    bool
		asked   []string
	}{
		{"postgres deadlock", dialect.Postgres[isolation.Default]{}, errors.New("ERROR: deadlock detected (SQLSTATE 40P01)"), nil, nil, false, nil},
		{"mysql deadlock", dialect.MySQL[isolation.Default]{}, deadlock, nil, nil, true, nil},
		{"mysql deadlock, wrapped", dialect.MySQL[isolation.Default]{}, fmt.Errorf("inserting: %w", deadlock), nil, nil, true, nil},
		{"mysql lock table full", dialect.MySQL[isolation.Default]{}, errors.New("Error 1206 (HY000): The total number of locks exceeds the lock table size"), nil, nil, true, nil},
		{"mysql duplicate key", dialect.MySQL[isolation.Default]{}, duplicate, nil, nil, false, nil},
		{"mysql lock wait timeout, statement rolled back", dialect.MySQL[isolation.Default]{}, timeout, map[string]string{rollbackOnTimeout: "0"}, nil, false, []string{rollbackOnTimeout}},
		{"mysql lock wait timeout, transaction rolled back", dialect.MySQL[isolation.Default]{}, timeout, map[string]string{rollbackOnTimeout: "1"}, nil, true, []string{rollbackOnTimeout}},
		{"mysql lock wait timeout, server not answering", dialect.MySQL[isolation.Default]{}, timeout, nil, map[string]error{rollbackOnTimeout: gone}, true, []string{rollbackOnTimeout}},
		{"mysql bad connection", dialect.MySQL[isolation.Default]{}, fmt.Errorf("exec: %w", driver.ErrBadConn), nil, nil, true, nil},
		{"mysql invalid connection", dialect.MySQL[isolation.Default]{}, errors.New("invalid connection"), nil, nil, true, nil},
		{"mysql rows read", dialect.MySQL[isolation.Default]{}, nil, nil, nil, false, nil},
		{"mariadb ended", dialect.MariaDB[isolation.Default]{}, deadlock, map[string]string{inTransaction: "0"}, nil, true, []string{inTransaction}},
		{"mariadb still open", dialect.MariaDB[isolation.Default]{}, duplicate, map[string]string{inTransaction: "1"}, nil, false, []string{inTransaction}},
		{"mariadb rows read, ended", dialect.MariaDB[isolation.Default]{}, nil, map[string]string{inTransaction: "0"}, nil, true, []string{inTransaction}},
		{"mariadb server not answering", dialect.MariaDB[isolation.Default]{}, duplicate, nil, map[string]error{inTransaction: gone}, true, []string{inTransaction}},
		{"runtime mariadb", dialect.Runtime{Dialect: dialect.MariaDB[isolation.Default]{}}, duplicate, map[string]string{inTransaction: "1"}, nil, false, []string{inTransaction}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDB{answers: tt.answers, fail: tt.fail}
			tx, err := f.open(t).BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if got := tt.d.TxEnded(context.Background(), tx, tt.err); got != tt.want {
				t.Errorf("TxEnded(%v) = %v, want %v", tt.err, got, tt.want)
			}
			var asked []string
			for _, e := range f.log() {
				if query, ok := strings.CutPrefix(e, "conn1: query "); ok {
					asked = append(asked, query)
				}
			}
			if fmt.Sprint(asked) != fmt.Sprint(tt.asked) {
				t.Errorf("asked the server %q, want %q", asked, tt.asked)
			}
		})
	}
}

func TestDuplicateOn(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("Error 1062 (23000): Duplicate entry 'a' for key 'jobs_unique_key'"), true},           // MariaDB
		{errors.New("Error 1062 (23000): Duplicate entry 'a' for key 'jobs.jobs_unique_key'"), true},      // MySQL 8
		{errors.New("Error 1062 (23000): Duplicate entry '7' for key 'PRIMARY'"), false},                  // another index
		{errors.New("Error 1062 (23000): Duplicate entry 'a' for key 'other_jobs_unique_key'"), false},    // a longer name
		{errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting"), false}, // another error
		{nil, false},
	} {
		if got := dialect.DuplicateOn(c.err, "jobs_unique_key"); got != c.want {
			t.Errorf("DuplicateOn(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
