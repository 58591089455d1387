package integration

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseSQLiteWriteContention measures what the lease form's documentation says of SQLite
// under write contention: three pools of four workers drain 3,000 rows (500 under -short or
// -race) with a 1 s lease while an application writer holds the write lock for 1.2 s at a time,
// longer than the lease. Settlements that wait past their lease find it lost and the row is handled again;
// the test requires that no row is lost and that every row handled twice was first reported in
// a "lease lost" warning naming it, and logs the share of rows handled twice
// (docs/reliability.md quotes it).
//
// The drain has no time limit: consumers get the lock only between the writer's holds, and how
// many rows settle in each gap is the machine's speed (under -race on a loaded machine a few a
// second). It fails when no row settles for contentionStall, which no gap explains.
func TestLeaseSQLiteWriteContention(t *testing.T) {
	var c cell
	for _, cc := range cells(t) {
		if cc.b.name == "sqlite" && cc.form == "lease" {
			c = cc
		}
	}
	if c.form == "" {
		t.Skip("no SQLite cell")
	}
	rows := 3000
	if testing.Short() || raceDetector {
		// The same checks over fewer rows, the share handled twice less precise: under -race
		// a loaded machine drained 3,000 rows in no less than 10 minutes.
		rows = 500
	}
	dbs := c.openDBs(t, 4, 6)
	tbl := c.b.newTable(t, dbs[0], fullTable)
	mustExec(t, dbs[0], "CREATE TABLE IF NOT EXISTS app_writes (n INTEGER)")
	msgs := make([]inbox.Message, rows)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: "q", Payload: []byte(fmt.Sprint(i))}
	}
	c.publish(t, dbs[0], tbl, msgs...)

	writerCtx, stopWriter := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for writerCtx.Err() == nil {
			slowWrite(writerCtx, t, dbs[3], 1200*time.Millisecond)
			time.Sleep(100 * time.Millisecond)
		}
	}()

	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		return outcome.Ack()
	})
	var logs inboxtest.Log
	var stops []func()
	for _, db := range dbs[:3] {
		stops = append(stops, runConsumer(t, db, c.newFormLease(t, tbl, time.Second), h, &inbox.Config{Queue: "q", Workers: 4, Logger: logs.Logger(slog.LevelDebug)}))
	}
	began := time.Now()
	waitProgress(t, contentionStall, "rows unprocessed", func() int {
		return len(c.ids(t, dbs[0], tbl, c.q(t, tbl.ProcessedAt)+" IS NULL"))
	})
	drained := time.Since(began)
	stopWriter()
	<-writerDone
	for _, stop := range stops {
		stop() // the settlements still waiting report their lost leases
	}

	if n := len(c.ids(t, dbs[0], tbl, "")); n != rows {
		t.Fatalf("%d rows in the table, want %d", n, rows)
	}
	reported := leaseLostIDs(logs.String())
	twice := 0
	for _, id := range c.ids(t, dbs[0], tbl, "") {
		switch n := len(rec.get(id)); {
		case n == 0:
			t.Errorf("row %d stamped processed without being handled", id)
		case n > 1:
			twice++
			if !reported[id] {
				t.Errorf("row %d handled %d times without a lease lost warning naming it: %+v", id, n, rec.get(id))
			}
		}
	}
	if t.Failed() {
		t.Log(logs.String())
	}
	t.Logf("%d rows drained in %v, %d deliveries, %d rows handled more than once (%.1f %%), %d lease lost warnings",
		rows, drained.Round(time.Second), rec.count(), twice, 100*float64(twice)/float64(rows), strings.Count(logs.String(), "lease lost"))
}

// contentionStall is how long TestLeaseSQLiteWriteContention's drain may go without a row
// settling. Between two of the writer's holds (1.2 s) a row settles unless every claim and
// settlement waiting then loses the lock to the writer again; each waits at most the busy
// timeout (5 s), and a row whose lease ran out is claimable a lease (1 s) later. Four times
// that 7.2 s leaves a loaded machine room; a row held for good never settles at all.
const contentionStall = 4 * (5*time.Second + 1200*time.Millisecond + time.Second)

// slowWrite holds SQLite's write lock for hold, as an application's long write would.
func slowWrite(ctx context.Context, t *testing.T, db *sql.DB, hold time.Duration) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return // the test is ending
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return // busy past the timeout: try again
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO app_writes (n) VALUES (1)"); err != nil {
		t.Errorf("the application's write: %v", err)
	}
	time.Sleep(hold)
	if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		t.Errorf("the application's COMMIT: %v", err)
	}
}

// leaseLostLine matches the ids of a "lease lost" warning: ids="[7 8]" or ids=[7].
var leaseLostLine = regexp.MustCompile(`lease lost[^\n]*? ids="?\[([0-9 ]*)\]`)

// leaseLostIDs returns the ids that the log's "lease lost" warnings name.
func leaseLostIDs(log string) map[int64]bool {
	out := map[int64]bool{}
	for _, m := range leaseLostLine.FindAllStringSubmatch(log, -1) {
		for _, f := range strings.Fields(m[1]) {
			id, err := strconv.ParseInt(f, 10, 64)
			if err == nil {
				out[id] = true
			}
		}
	}
	return out
}
