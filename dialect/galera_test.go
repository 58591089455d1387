package dialect_test

import (
	"context"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestCheckGaleraAsksOnlyMySQLFamilyServers: on Postgres and SQLite, and for the lease form on
// any server, CheckGalera sends no statement (the live Galera cluster's refusals are proven in
// integration's TestClusterGalera).
func TestCheckGaleraAsksOnlyMySQLFamilyServers(t *testing.T) {
	cases := []struct {
		d    dialect.Dialect
		form dialect.Form
	}{
		{dialect.Postgres[isolation.Default]{}, dialect.RowLockForm},
		{dialect.Postgres[isolation.Default]{}, dialect.AdvisoryForm},
		{dialect.SQLite[isolation.Default]{}, dialect.LeaseForm},
		{dialect.MariaDB[isolation.Default]{}, dialect.LeaseForm},
		{dialect.MySQL[isolation.Default]{}, dialect.LeaseForm},
	}
	for _, c := range cases {
		f := &fakeDB{}
		if err := dialect.CheckGalera(context.Background(), c.d, f.open(t), c.form); err != nil {
			t.Errorf("%s, %s form: %v", c.d.Name(), c.form, err)
		}
		if got := f.log(); len(got) != 0 {
			t.Errorf("%s, %s form: sent %q, want nothing", c.d.Name(), c.form, got)
		}
	}
}
