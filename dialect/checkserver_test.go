package dialect_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestCheckServerAfterACutConnection: a version query that fails on a connection cut under it
// is the connection's failure, not another database's server, although Postgres answers
// SELECT VERSION() too (a consumer's Run gave up with ErrDialect after a killed session).
func TestCheckServerAfterACutConnection(t *testing.T) {
	cut := errors.New("unexpected EOF")
	for _, tt := range []struct {
		d     dialect.Dialect
		fails string
		other string // what SELECT VERSION() answers
	}{
		{dialect.Postgres[isolation.Default]{}, "SHOW server_version_num", "PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu"},
	} {
		f := &fakeDB{answers: map[string]string{"SELECT VERSION()": tt.other}, fail: map[string]error{tt.fails: cut}}
		err := tt.d.CheckServer(context.Background(), f.open(t))
		if errors.Is(err, inbox.ErrDialect) || !errors.Is(err, cut) {
			t.Errorf("%s: CheckServer = %v; want the cut connection's error, not ErrDialect", tt.d.Name(), err)
		}
		f = &fakeDB{answers: map[string]string{"SELECT VERSION()": "10.11.19-MariaDB"}, fail: map[string]error{tt.fails: cut}}
		if err := tt.d.CheckServer(context.Background(), f.open(t)); !errors.Is(err, inbox.ErrDialect) {
			t.Errorf("%s on a MariaDB server: CheckServer = %v; want ErrDialect", tt.d.Name(), err)
		}
	}
}
