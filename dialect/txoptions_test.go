package dialect

import (
	"database/sql"
	"testing"

	"github.com/sqlinbox/inbox/isolation"
)

func TestTxOptions(t *testing.T) {
	if got := TxOptions(SQLite[isolation.Immediate]{}); got != nil {
		t.Errorf("SQLite: %+v, want nil (its modes are BEGIN statements)", got)
	}
	for _, tc := range []struct {
		d    Dialect
		want *sql.TxOptions
	}{
		{Postgres[isolation.Default]{}, nil},
		{Postgres[isolation.ReadCommitted]{}, &sql.TxOptions{Isolation: sql.LevelReadCommitted}},
		{Postgres[isolation.RepeatableRead]{}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead}},
		{Postgres[isolation.Serializable]{}, &sql.TxOptions{Isolation: sql.LevelSerializable}},
		{MySQL[isolation.Default]{}, &sql.TxOptions{Isolation: sql.LevelReadCommitted}},
		{MySQL[isolation.ReadUncommitted]{}, &sql.TxOptions{Isolation: sql.LevelReadUncommitted}},
		{MariaDB[isolation.Default]{}, &sql.TxOptions{Isolation: sql.LevelReadCommitted}},
		{MariaDB[isolation.Serializable]{}, &sql.TxOptions{Isolation: sql.LevelSerializable}},
	} {
		got := TxOptions(tc.d)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s at %s: %+v, want %+v", tc.d.Name(), tc.d.Level(), got, tc.want)
		}
	}
}
