package inboxotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	inboxotel "github.com/sqlinbox/inbox/otel"
)

// TestAdminStatsGaugesTheOldestDueRow: AdminStats reports a queue's due rows and its oldest
// due row's age, dated by the publishing time where the table has one (CreatedAt), so the
// gauge reports rows never delayed; without it, their age is unknown, and the age's gauge is
// not recorded while the depth's still is.
func TestAdminStatsGaugesTheOldestDueRow(t *testing.T) {
	ctx := context.Background()
	for _, withCreated := range []bool{true, false} {
		db := openSQLite(t)
		tbl := jobs
		if withCreated {
			if _, err := db.Exec("ALTER TABLE jobs ADD COLUMN created_at TEXT"); err != nil {
				t.Fatal(err)
			}
			tbl.CreatedAt = "created_at"
		}
		if err := inbox.Enqueue(ctx, db, sqliteD, tbl, inbox.Message{Queue: "q"}, inbox.Message{Queue: "q"}, inbox.Message{Queue: "other"}); err != nil {
			t.Fatal(err)
		}
		if withCreated {
			if _, err := db.Exec("UPDATE jobs SET created_at = ? WHERE id = 1", sqliteD.Time(time.Now().Add(-90*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		a, err := admin.New(db, sqliteD, tbl)
		if err != nil {
			t.Fatal(err)
		}
		o := newObserved(t)
		reg, err := o.obs.WatchQueue("q", "jobs", inboxotel.AdminStats(a, "q"))
		if err != nil {
			t.Fatal(err)
		}
		rm := o.collect(t)
		reg.Unregister()
		g, ok := metric(t, rm, "inbox.queue.depth").Data.(metricdata.Gauge[int64])
		if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 2 {
			t.Errorf("CreatedAt %v: inbox.queue.depth %+v, want 2", withCreated, g)
		}
		var age metricdata.Gauge[float64]
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "inbox.queue.oldest_age" {
					age, _ = m.Data.(metricdata.Gauge[float64])
				}
			}
		}
		switch {
		case withCreated && (len(age.DataPoints) != 1 || age.DataPoints[0].Value < 90 || age.DataPoints[0].Value > 150):
			t.Errorf("with CreatedAt: inbox.queue.oldest_age %+v, want 90 s (the oldest row's publishing)", age)
		case !withCreated && len(age.DataPoints) != 0:
			t.Errorf("without CreatedAt: inbox.queue.oldest_age %+v, want none recorded (the age is unknown)", age)
		}
	}
}
