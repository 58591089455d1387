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
	quiet := map[dialect.Dialect][]dialect.Form{ // each dialect, and the forms it checks without a word
		dialect.Postgres[isolation.Default]{}: {dialect.RowLockForm, dialect.AdvisoryForm},
		dialect.SQLite[isolation.Default]{}:   {dialect.LeaseForm},
		dialect.MariaDB[isolation.Default]{}:  {dialect.LeaseForm},
		dialect.MySQL[isolation.Default]{}:    {dialect.LeaseForm},
	}
	for d, forms := range quiet {
		for _, form := range forms {
			f := &fakeDB{}
			if err := dialect.CheckGalera(context.Background(), d, f.open(t), form); err != nil {
				t.Errorf("%s, %s form: %v", d.Name(), form, err)
			}
			if got := f.log(); len(got) != 0 {
				t.Errorf("%s, %s form: sent %q, want nothing", d.Name(), form, got)
			}
		}
	}
}
