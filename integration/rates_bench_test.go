package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
)

// BenchmarkClaimRated is what a rate that does not bind costs a claim of the lease form. Each op
// claims one row of queue q and acks it, through the form alone, on two tables of one database:
// one whose description names no rates table, and one whose queue has a rate of 100 starts
// per millisecond, so that each of its claims reads the rate in its pick, reads the queue's rates and
// a free slot, and takes it, in a transaction (on Postgres, in the place of the one-statement
// claim). The two alternate in every op; the benchmark reports each one's time per claim and
// acknowledgement (off-µs/op, on-µs/op) and their ratio (on/off). The rows are published before
// the timing.
//
//	go test -run '^$' -bench ClaimRated -benchtime 2000x -count 3 ./integration/
func BenchmarkClaimRated(b *testing.B) {
	s := startServers(nil)
	for _, be := range []backend{backendNamed("postgres", s.postgres), backendNamed("mariadb", s.mariadb), backendNamed("sqlite", "")} {
		b.Run(be.name, func(b *testing.B) { benchClaimRated(b, be) })
	}
}

func benchClaimRated(b *testing.B, be backend) {
	db := benchDB(b, be)
	ctx := context.Background()
	var forms [2]inbox.Form
	for i, rated := range []bool{false, true} {
		tbl := benchPauseTable(b, be, db, fmt.Sprintf("inbox_%d_rate_bench_%d", os.Getpid(), i))
		if rated {
			tbl.Rates = inbox.RatesTable
			st, err := inbox.RatesSchema(be.dialect, tbl)
			if err == nil {
				_, err = db.Exec(st)
			}
			c, cerr := inbox.NewClient(db, be.dialect, tbl)
			if err == nil && cerr == nil {
				err = c.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 100, Per: time.Millisecond})
			}
			if err != nil || cerr != nil {
				b.Fatal(err, cerr)
			}
			defer c.ClearRate(ctx, "q", inbox.LimitPerQueue, "")
		}
		benchFill(b, be, db, tbl, "")
		forms[i] = lease.New(be.dialect, tbl, nil)
		if _, err := forms[i].Open(ctx, db, inbox.Binding{Name: "q"}); err != nil {
			b.Fatal(err)
		}
		defer forms[i].Close()
	}
	took := benchAlternating(b, forms[:])
	b.ReportMetric(float64(took[0].Microseconds())/float64(b.N), "off-µs/op")
	b.ReportMetric(float64(took[1].Microseconds())/float64(b.N), "on-µs/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "on/off")
}
