package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// BenchmarkClaimPaused is what a pauses table costs a claim. Each op claims one row of queue q
// and acks it (a DELETE), through the form alone, on two tables of one database, one after the
// other: one whose description names no pauses table, and one naming one in which another
// queue is paused, so that each of its claims also reads the pauses table's primary key. The
// two alternate in every op, so that a load that comes and goes on the machine weighs on both
// alike; the benchmark reports each one's time per claim and acknowledgement (off-µs/op,
// on-µs/op) and their ratio (on/off). Each database with the forms that hold rows by a
// statement's locks or by leases: the row lock form on the servers, the lease form everywhere.
// The rows are published before the timing.
//
//	go test -run '^$' -bench ClaimPaused -benchtime 3000x -count 3 ./integration/
func BenchmarkClaimPaused(b *testing.B) {
	s := startServers(nil)
	for _, be := range []backend{backendNamed("postgres", s.postgres), backendNamed("mariadb", s.mariadb), backendNamed("sqlite", "")} {
		for _, form := range []string{"rowlock", "lease"} {
			if form == "rowlock" && be.name == "sqlite" {
				continue
			}
			b.Run(be.name+"-"+form, func(b *testing.B) { benchClaimPaused(b, be, form) })
		}
	}
}

func benchClaimPaused(b *testing.B, be backend, form string) {
	db := benchDB(b, be)
	ctx := context.Background()
	var forms [2]inbox.Form
	for i, pauses := range []bool{false, true} {
		tbl := benchPauseTable(b, be, db, fmt.Sprintf("inbox_%d_pause_bench_%d", os.Getpid(), i))
		if pauses {
			tbl.Pauses = inbox.PausesTable
			c, err := inbox.NewClient(db, be.dialect, tbl)
			if err != nil {
				b.Fatal(err)
			}
			st, err := inbox.PausesSchema(be.dialect, tbl)
			if err == nil {
				_, err = db.Exec(st)
			}
			if err == nil {
				err = c.Pause(ctx, "other")
			}
			if err != nil {
				b.Fatal(err)
			}
			defer c.Resume(ctx, "other")
		}
		benchFill(b, be, db, tbl, "")
		forms[i] = cell{b: be, form: form}.newForm(b, tbl)
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

// benchDB opens be's database for a benchmark, SQLite in a file of b's own; it skips b where be
// has no server, and closes the pool when b ends.
func benchDB(b *testing.B, be backend) *sql.DB {
	dsn := be.dsn
	if be.name == "sqlite" {
		dsn = SQLiteDSN(filepath.Join(b.TempDir(), "inbox.db"))
	}
	if dsn == "" {
		b.Skipf("%s: no server", be.name)
	}
	db, err := sql.Open(be.driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(6)
	return db
}

// benchFill publishes b.N rows of queue q, of limit key key ("" for none), to tbl.
func benchFill(b *testing.B, be backend, db *sql.DB, tbl inbox.Table, key string) {
	for left := b.N; left > 0; left -= 1000 {
		msgs := messages("q", min(left, 1000))
		for i := range msgs {
			msgs[i].LimitKey = key
		}
		if err := inbox.Enqueue(context.Background(), db, be.dialect, tbl, msgs...); err != nil {
			b.Fatal(err)
		}
	}
}

// benchAlternating times b.N rounds, each claiming one row of queue q on every form of forms in
// turn and acknowledging it, and returns each form's time over them all.
func benchAlternating(b *testing.B, forms []inbox.Form) []time.Duration {
	ctx := context.Background()
	took := make([]time.Duration, len(forms))
	b.ResetTimer()
	for range b.N {
		for i, f := range forms {
			start := time.Now()
			ds, err := f.Claim(ctx, 1)
			if err != nil || len(ds) != 1 {
				b.Fatalf("Claim: %d rows, %v", len(ds), err)
			}
			if err := f.Settle(ctx, ds[0], outcome.Ack()); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
		}
	}
	return took
}

// benchPauseTable creates the bench table called name on db (dropped when the benchmark ends):
// an id, a payload, an attempt, a queue and a lease column, and the claim index on queue and
// id.
func benchPauseTable(b *testing.B, be backend, db *sql.DB, name string) inbox.Table {
	ddl := []string{"CREATE TABLE " + name + " (id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, grp TEXT NOT NULL DEFAULT '', locked_until TIMESTAMPTZ)"}
	switch be.name {
	case "mariadb":
		ddl = []string{"CREATE TABLE " + name + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, attempt INT NOT NULL DEFAULT 0, grp VARCHAR(191) NOT NULL DEFAULT '', locked_until DATETIME(6), INDEX (grp, id))"}
	case "sqlite":
		ddl = []string{"CREATE TABLE " + name + " (id INTEGER PRIMARY KEY, payload BLOB, attempt INT NOT NULL DEFAULT 0, grp TEXT NOT NULL DEFAULT '', locked_until TEXT)"}
	}
	ddl = append(ddl, "CREATE INDEX "+name+"_claim ON "+name+" (grp, id)")
	if be.name == "mariadb" {
		ddl = ddl[:1]
	}
	db.Exec("DROP TABLE IF EXISTS " + name)
	for _, st := range ddl {
		if _, err := db.Exec(st); err != nil {
			b.Fatalf("%s: %s: %v", be.name, st, err)
		}
	}
	b.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	return inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", Queue: "grp", LockedUntil: "locked_until"}
}
