package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
)

// BenchmarkClaimKeyRated is what rates per limit key cost a claim of the lease form, where they
// do not bind. Each op claims one row of queue q and acks it, through the form alone, on three
// tables of one database, each whose queue has a rate of 100 starts per millisecond: one
// without a limit key column (base), one with the column and its rows' key but no key's rate
// (column: the pick's key predicate and its read of the key), and one whose key has a rate of
// 100 per millisecond too (key: the key's rate read, its free slot read and taken). The three
// alternate in every op; it reports each one's time per claim and acknowledgement and the
// ratios to base. The rows are published before the timing.
//
//	go test -run '^$' -bench ClaimKeyRated -benchtime 1000x -count 3 ./integration/
func BenchmarkClaimKeyRated(b *testing.B) {
	s := startServers(nil)
	for _, be := range []backend{backendNamed("postgres", s.postgres), backendNamed("mariadb", s.mariadb), backendNamed("sqlite", "")} {
		b.Run(be.name, func(b *testing.B) { benchClaimKeyRated(b, be) })
	}
}

func benchClaimKeyRated(b *testing.B, be backend) {
	db := benchDB(b, be)
	var forms [3]inbox.Form
	for i := range forms {
		forms[i] = benchKeyRatedForm(b, be, db, i)
		defer forms[i].Close()
	}
	took := benchAlternating(b, forms[:])
	b.ReportMetric(float64(took[0].Microseconds())/float64(b.N), "base-µs/op")
	b.ReportMetric(float64(took[1].Microseconds())/float64(b.N), "column-µs/op")
	b.ReportMetric(float64(took[2].Microseconds())/float64(b.N), "key-µs/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "column/base")
	b.ReportMetric(float64(took[2])/float64(took[0]), "key/base")
}

// benchKeyRatedForm is the open form of the benchmark's table variant (0: a queue's rate; 1:
// and a limit key column; 2: and a rate of the rows' key), with b.N rows published.
func benchKeyRatedForm(b *testing.B, be backend, db *sql.DB, variant int) inbox.Form {
	ctx := context.Background()
	tbl := benchPauseTable(b, be, db, fmt.Sprintf("inbox_%d_keyrate_bench_%d", os.Getpid(), variant))
	tbl.Rates = inbox.RatesTable
	key := ""
	if variant > 0 {
		tbl.LimitKey, key = "limit_key", "tenant-1"
		if _, err := db.Exec("ALTER TABLE " + tbl.Name + " ADD limit_key VARCHAR(191) NULL"); err != nil {
			b.Fatal(err)
		}
	}
	st, err := inbox.RatesSchema(be.dialect, tbl)
	if err == nil {
		_, err = db.Exec(st)
	}
	c, cerr := inbox.NewClient(db, be.dialect, tbl)
	if err == nil && cerr == nil {
		err = c.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 100, Per: time.Millisecond})
	}
	if err == nil && variant == 2 {
		err = c.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKey, Key: key, Starts: 100, Per: time.Millisecond})
	}
	if err != nil || cerr != nil {
		b.Fatal(err, cerr)
	}
	b.Cleanup(func() { db.Exec("DELETE FROM "+inbox.RatesTable+" WHERE table_name = "+be.placeholders(1), tbl.Name) })
	benchFill(b, be, db, tbl, key)
	f := lease.New(be.dialect, tbl, nil)
	if _, err := f.Open(ctx, db, inbox.Binding{Name: "q"}); err != nil {
		b.Fatal(err)
	}
	return f
}
