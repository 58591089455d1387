package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sqlinbox/inbox"
)

// BenchmarkEnqueueAlternatingColumns publishes 1,500 messages in one Enqueue whose own columns
// alternate (every other message sets region as well as account; the others leave region to
// its default), on each database: messages that, written as one INSERT per run of messages
// setting the same columns, cost a statement each. One op is one Enqueue of the 1,500 rows,
// all or nothing; msgs/s is the rate. The table is emptied between ops, outside the timing.
//
//	go test -run '^$' -bench EnqueueAlternatingColumns -benchtime 5x ./integration/
func BenchmarkEnqueueAlternatingColumns(b *testing.B) {
	const n = 1500
	s := startServers(nil)
	for _, be := range []backend{backendNamed("postgres", s.postgres), backendNamed("mysql", s.mysql), backendNamed("mariadb", s.mariadb), backendNamed("sqlite", "")} {
		b.Run(be.name, func(b *testing.B) {
			dsn, ddl := be.dsn, "(id BIGSERIAL PRIMARY KEY, payload BYTEA, grp TEXT, account TEXT NOT NULL DEFAULT '', region TEXT DEFAULT 'none')"
			switch be.name {
			case "mysql", "mariadb":
				ddl = "(id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, grp VARCHAR(191), account VARCHAR(191) NOT NULL DEFAULT '', region VARCHAR(191) DEFAULT 'none')"
			case "sqlite":
				dsn, ddl = SQLiteDSN(filepath.Join(b.TempDir(), "inbox.db")), "(id INTEGER PRIMARY KEY, payload BLOB, grp TEXT, account TEXT NOT NULL DEFAULT '', region TEXT DEFAULT 'none')"
			}
			db, err := sql.Open(be.driver, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			tbl := inbox.Table{Name: fmt.Sprintf("inbox_%d_publish_bench", os.Getpid()), ID: "id", IDGenerated: true, Payload: "payload", Queue: "grp"}
			if _, err := db.Exec("CREATE TABLE " + tbl.Name + " " + ddl); err != nil {
				b.Skipf("%s: %v", be.name, err)
			}
			defer db.Exec("DROP TABLE " + tbl.Name)
			msgs := make([]inbox.Message, n)
			for i := range msgs {
				msgs[i] = inbox.Message{Queue: "q", Payload: fmt.Appendf(nil, "%d", i), Columns: map[string]any{"account": fmt.Sprintf("acct-%d", i%7)}}
				if i%2 == 1 {
					msgs[i].Columns["region"] = "eu"
				}
			}
			ctx := context.Background()
			for b.Loop() {
				if err := inbox.Enqueue(ctx, db, be.dialect, tbl, msgs...); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := db.Exec("DELETE FROM " + tbl.Name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
