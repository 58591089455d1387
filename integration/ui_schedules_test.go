package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
)

// TestUISchedulesInABrowser: a periodic job's schedule, named with markup, shows on the
// schedules page with its last and next tick, as text, and its last job's link opens that
// job's row; without its ticks table the page says it cannot be read, and how to create it.
func TestUISchedulesInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := periodicCreate(t, b, db)
		a, err := admin.New(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		name := `nightly "report" ` + pageScript
		p := inbox.NewPeriodic(db, b.dialect, tbl, &inbox.PeriodicConfig{Logger: testLogger(t)})
		if err := p.Add(inbox.PeriodicJob{Name: name, Schedule: inbox.Every(200 * time.Millisecond), Message: func(time.Time) inbox.Message {
			return inbox.Message{Queue: "reports", Payload: []byte(`{"report":"nightly"}`)}
		}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		waitFor(t, 30*time.Second, "the schedule's first job", func() bool {
			list, err := a.Schedules(context.Background())
			return err == nil && len(list) == 1 && list[0].JobID != 0
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Periodic.Run: %v", err)
		}
		list, err := a.Schedules(context.Background())
		if err != nil {
			t.Fatal(err)
		}

		base := servePage(t, a, nil)
		br := newBrowser(t, 1280, 900)
		br.do(chromedp.Navigate(base + "/schedules"))
		shown := br.text("table.schedules tbody")
		if !strings.Contains(shown, name) || !strings.Contains(shown, list[0].LastTick.Format("2006-01-02 15:04:05Z")) {
			t.Errorf("the schedules page shows %q, want the schedule %q, as text, and its last tick %v", shown, name, list[0].LastTick)
		}
		job := itoa(list[0].JobID)
		br.do(chromedp.Click(chromedp.CSS(`table.schedules a[href$="/rows/`+job+`"]`)), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		if p := br.text("pre.payload"); !strings.Contains(p, "nightly") {
			t.Errorf("the last job's link opened a row whose payload is %q, want the job's", p)
		}
		if n := br.dialogs.Load(); n != 0 {
			t.Errorf("the pages opened %d JavaScript dialogs: a schedule's name ran as a script", n)
		}

		mustExec(t, db, "DROP TABLE "+b.q(t, inbox.TicksTable(tbl.Name)))
		br.do(chromedp.Navigate(base + "/schedules"))
		if body := br.text("main"); !strings.Contains(body, "its ticks table cannot be read") || !strings.Contains(body, "CREATE TABLE") {
			t.Errorf("the schedules page of a table without a ticks table: %q, want it to say so with the statement that creates it", body)
		}
	})
}
