package integration

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

// TestAdminStatsByKind: on a table with a Kind column, Stats counts each queue's rows per kind
// too, the kinds' figures adding up to the queue's, a NULL kind and an empty one both counted
// as no kind; its JSON writes them under "kinds".
func TestAdminStatsByKind(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, _ := adminOpen(t, b)
		mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD COLUMN "+b.q(t, "kind")+" VARCHAR(64)")
		tbl.Kind = "kind"
		a, err := admin.New(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		ids := insertRows(t, b, db, tbl, now,
			adminRow{queue: "a", retryAfter: -20 * time.Minute},                     // mail, due 20 min
			adminRow{queue: "a", retryAfter: -time.Minute},                          // mail, due 1 min
			adminRow{queue: "a", attempt: 1, retryAfter: time.Hour},                 // mail, delayed
			adminRow{queue: "a", retryAfter: -3 * time.Minute},                      // report, due 3 min
			adminRow{queue: "a", attempt: 3, dead: -time.Minute, lastError: "boom"}, // report, dead
			adminRow{queue: "a", retryAfter: -30 * time.Minute},                     // NULL kind, due 30 min
			adminRow{queue: "a", retryAfter: -2 * time.Minute},                      // empty kind, due 2 min
			adminRow{queue: "b", retryAfter: -5 * time.Minute},                      // mail, due 5 min
		)
		for i, kind := range []any{"mail", "mail", "mail", "report", "report", nil, "", "mail"} {
			mustExec(t, db, "UPDATE "+b.q(t, tbl.Name)+" SET "+b.q(t, "kind")+" = "+b.placeholders(1)+" WHERE "+b.q(t, "id")+" = "+b.dialect.Placeholder(2), kind, ids[i])
		}
		stats, err := a.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 2 {
			t.Fatalf("stats of %d queues, want 2: %+v", len(stats), stats)
		}
		// Ages are checked to the minute, then left out of the comparison.
		ages := map[string]time.Duration{}
		round := func(s *admin.Stats, key string) {
			ages[key] = s.OldestDue.Truncate(time.Minute)
			s.OldestDue = 0
		}
		for qi := range stats {
			round(&stats[qi], stats[qi].Queue)
			for ki := range stats[qi].Kinds {
				round(&stats[qi].Kinds[ki], stats[qi].Queue+"/"+stats[qi].Kinds[ki].Kind)
			}
		}
		wantAges := map[string]time.Duration{"a": 30 * time.Minute, "a/": 30 * time.Minute, "a/mail": 20 * time.Minute, "a/report": 3 * time.Minute, "b": 5 * time.Minute, "b/mail": 5 * time.Minute}
		if !reflect.DeepEqual(ages, wantAges) {
			t.Errorf("oldest due by queue/kind %v, want %v", ages, wantAges)
		}
		want := []admin.Stats{
			{Queue: "a", Due: 5, Delayed: 1, Retrying: 1, Dead: 1, Kinds: []admin.Stats{
				{Queue: "a", Due: 2},
				{Queue: "a", Kind: "mail", Due: 2, Delayed: 1, Retrying: 1},
				{Queue: "a", Kind: "report", Due: 1, Dead: 1},
			}},
			{Queue: "b", Due: 1, Kinds: []admin.Stats{{Queue: "b", Kind: "mail", Due: 1}}},
		}
		if !reflect.DeepEqual(stats, want) {
			t.Errorf("stats:\n got %+v\nwant %+v", stats, want)
		}
		j, err := json.Marshal(stats[1])
		if err != nil {
			t.Fatal(err)
		}
		const wantJSON = `{"queue":"b","due":1,"delayed":0,"in_work":0,"retrying":0,"dead":0,"processed":0,"cancelled":0,"kinds":[{"queue":"b","due":1,"delayed":0,"in_work":0,"retrying":0,"dead":0,"processed":0,"cancelled":0,"kind":"mail","oldest_due_seconds":0}],"oldest_due_seconds":0}`
		if string(j) != wantJSON {
			t.Errorf("JSON:\n got %s\nwant %s", j, wantJSON)
		}
		var back admin.Stats
		if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(back, stats[1]) {
			t.Errorf("JSON read back as %+v (%v), want %+v", back, err, stats[1])
		}
	})
}
