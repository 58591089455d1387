package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
)

func TestEnqueueWritesEveryRole(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		ctx := context.Background()
		msg := inbox.Message{Queue: "billing", Payload: []byte("p\x00\xff"), Priority: -3, Headers: map[string]string{"trace": "a\"b"}}
		if err := inbox.Enqueue(ctx, db, b.dialect, tbl, msg); err != nil {
			t.Fatal(err)
		}
		var (
			payload  []byte
			group    string
			priority int
			headers  sql.NullString
			attempt  int
		)
		row := db.QueryRowContext(ctx, "SELECT payload, grp, priority, headers, attempt FROM "+b.q(t, tbl.Name))
		if err := row.Scan(&payload, &group, &priority, &headers, &attempt); err != nil {
			t.Fatal(err)
		}
		if string(payload) != "p\x00\xff" || group != "billing" || priority != -3 || attempt != 0 {
			t.Fatalf("row: payload %q, group %q, priority %d, attempt %d", payload, group, priority, attempt)
		}
		if !strings.Contains(headers.String, `"trace":"a\"b"`) {
			t.Fatalf("headers column holds %q, want the JSON object", headers.String)
		}
	})
}

func TestEnqueueBatchInsertsEveryRow(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, minimalTable)
		const n = 2500 // more than one statement's worth of rows
		msgs := make([]inbox.Message, n)
		for i := range msgs {
			msgs[i].Payload = []byte(fmt.Sprint(i))
		}
		if err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, msgs...); err != nil {
			t.Fatal(err)
		}
		if got := count(t, db, "SELECT COUNT(DISTINCT payload) FROM "+b.q(t, tbl.Name)); got != n {
			t.Fatalf("%d distinct rows, want %d", got, n)
		}
	})
}

func TestEnqueueTxCommitsAndRollsBackWithTheCaller(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, minimalTable)
		for _, commit := range []bool{false, true} {
			b.enqueueTx(t, db, tbl, commit, inbox.Message{Payload: []byte("x")}, inbox.Message{Payload: []byte("y")})
		}
		if got := b.countRows(t, db, tbl, ""); got != 2 {
			t.Fatalf("%d rows after one rolled-back and one committed publish of two, want 2", got)
		}
	})
}

func TestEnqueueDelayAndExplicitIDs(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, givenIDs(fullTable))
		ctx := context.Background()
		err := inbox.Enqueue(ctx, db, b.dialect, tbl, inbox.Message{Payload: []byte("x")})
		if err == nil || !strings.Contains(err.Error(), "Message.ID") {
			t.Fatalf("a message without an id for a table whose id is not generated: %v", err)
		}
		err = inbox.Enqueue(ctx, db, b.dialect, tbl,
			inbox.Message{ID: 9223372036854775807, Payload: []byte("max")},
			inbox.Message{ID: 7, Payload: []byte("later"), Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		later := b.dialect.Time(time.Now().Add(30 * time.Minute))
		q := "SELECT COUNT(*) FROM " + b.q(t, tbl.Name) + " WHERE id = 7 AND retry_after > " + b.dialect.Placeholder(1)
		if got := count(t, db, q, later); got != 1 {
			t.Fatal("the delayed row is not hidden for its delay")
		}
		if got := count(t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE id = 9223372036854775807 AND retry_after IS NULL"); got != 1 {
			t.Fatal("the row with the largest id is missing")
		}
	})
}

func TestEnqueueJSON(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		type order struct {
			Account string `json:"account"`
			Cents   int    `json:"cents"`
		}
		ctx := context.Background()
		if err := inbox.EnqueueJSON(ctx, db, b.dialect, tbl, "orders", order{"a", 1}, order{"b", 2}); err != nil {
			t.Fatal(err)
		}
		if got := count(t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE grp = 'orders'"); got != 2 {
			t.Fatalf("%d rows in queue orders, want 2", got)
		}
		_, err := inbox.JSONMessage("orders", make(chan int))
		if err == nil || !strings.Contains(err.Error(), `"orders"`) {
			t.Fatalf("a value JSON cannot encode: %v", err)
		}
	})
}

func TestEnqueueToAMissingTableNamesIt(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 0)
		err := inbox.Enqueue(context.Background(), db, b.dialect, minimalTable("no_such_table_here"), inbox.Message{})
		if err == nil || !strings.Contains(err.Error(), "no_such_table_here") || errors.Is(err, context.Canceled) {
			t.Fatalf("publishing to a missing table: %v", err)
		}
	})
}

func TestEnqueueToATableOfIDsOnly(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 0)
		tbl := inbox.Table{Name: tableName(t), ID: "id", IDGenerated: true}
		b.createTable(t, db, tbl)
		if err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, make([]inbox.Message, 3)...); err != nil {
			t.Fatal(err)
		}
		if got := count(t, db, "SELECT COUNT(DISTINCT id) FROM "+b.q(t, tbl.Name)); got != 3 {
			t.Fatalf("%d rows, want 3", got)
		}
	})
}

// TestEnqueueIsAllOrNothing publishes more rows than one statement takes, with a duplicate id in
// the third statement's rows: the publish fails, says nothing was published, and no row landed.
func TestEnqueueIsAllOrNothing(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, givenIDs(minimalTable))
		const n = 2500 // three statements: 1,000, 1,000 and 500 rows
		msgs := make([]inbox.Message, n)
		for i := range msgs {
			msgs[i] = inbox.Message{ID: int64(i + 1), Payload: []byte(fmt.Sprint(i))}
		}
		msgs[2400].ID = 1 // refused by the third statement
		err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, msgs...)
		if err == nil {
			t.Fatal("a publish with a duplicate id succeeded")
		}
		if got := b.countRows(t, db, tbl, ""); got != 0 {
			t.Fatalf("%d rows landed from a publish that failed (%v), want none", got, err)
		}
		if !strings.Contains(err.Error(), "nothing was published") {
			t.Fatalf("the error does not say that nothing was published: %v", err)
		}
		msgs[2400].ID = n + 1
		if err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, msgs...); err != nil {
			t.Fatal(err)
		}
		if got := b.countRows(t, db, tbl, ""); got != n {
			t.Fatalf("%d rows after the publish, want %d", got, n)
		}
	})
}
