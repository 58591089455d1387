package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/sqlinbox/inbox"
)

// TestEnqueueMixedOwnColumns: one Enqueue of messages that set different own columns publishes
// every row in the messages' order (ids ascending), each own column a message leaves out at its
// default (not NULL), on every database; on Postgres with Notify too, whose INSERT runs inside
// the notifying statement.
func TestEnqueueMixedOwnColumns(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 4, fullTable)
		tbl.Notify = true // ignored but on Postgres
		text := "TEXT"
		if b.name == "mysql" || b.name == "mariadb" {
			text = "VARCHAR(191)"
		}
		for _, c := range []string{"account " + text + " NOT NULL DEFAULT 'nobody'", "region " + text + " DEFAULT 'none'"} {
			mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD COLUMN "+c)
		}
		const n = 2500 // more than one statement takes
		msgs := make([]inbox.Message, n)
		for i := range msgs {
			msgs[i] = inbox.Message{Queue: "q", Payload: fmt.Appendf(nil, "%d", i)}
			switch i % 3 {
			case 0:
				msgs[i].Columns = map[string]any{"account": fmt.Sprint("acct-", i)}
			case 1:
				msgs[i].Columns = map[string]any{"account": fmt.Sprint("acct-", i), "region": "eu"}
			}
		}
		if err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, msgs...); err != nil {
			t.Fatal(err)
		}
		i := 0
		var payload []byte
		var account, region string
		forRows(t, db, "SELECT payload, account, region FROM "+b.q(t, tbl.Name)+" ORDER BY id", nil, func() {
			want := [3][2]string{{fmt.Sprint("acct-", i), "none"}, {fmt.Sprint("acct-", i), "eu"}, {"nobody", "none"}}[i%3]
			if string(payload) != fmt.Sprint(i) || account != want[0] || region != want[1] {
				t.Fatalf("row %d of the id order: payload %s, account %q, region %q; want payload %d, account %q, region %q", i+1, payload, account, region, i, want[0], want[1])
			}
			i++
		}, &payload, &account, &region)
		if i != n {
			t.Fatalf("%d rows published, want %d", i, n)
		}
	})
}
