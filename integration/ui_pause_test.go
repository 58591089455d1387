package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/ui"
)

// TestUIPauseInABrowser: where the description names a pauses table, the overview pauses a
// queue from its button (the database then lists it paused, and the page marks it at once),
// resumes it from the same place, refuses a POST without the session's token, and a read-only
// page shows no button.
func TestUIPauseInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := createdTable(tableName(t))
		tbl.Pauses = inbox.PausesTable
		pausesCreate.Lock()
		st, err := inbox.PausesSchema(b.dialect, tbl)
		if err == nil {
			_, err = db.ExecContext(ctx, st)
		}
		pausesCreate.Unlock()
		if err != nil {
			t.Fatalf("creating the pauses table: %v", err)
		}
		a := createAdminTable(t, b, db, tbl)
		t.Cleanup(func() { a.Resume(context.Background(), "emails") })
		publishIDs(t, b, db, tbl, inbox.Message{Queue: "emails", Payload: []byte(`{}`)}, inbox.Message{Queue: "reports", Payload: []byte(`{}`)})
		paused := func() []string {
			t.Helper()
			list, err := a.Paused(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range list {
				names = append(names, p.Queue)
			}
			return names
		}

		base := servePage(t, a, &ui.Config{CountEvery: time.Hour})
		br := newBrowser(t, 1280, 900)
		emails := `table.counts tbody tr:has(input[name="queue"][value="emails"])`
		br.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(emails+` button[value="pause"]`)),
			chromedp.Click(chromedp.CSS(emails+` button[value="pause"]`)),
			chromedp.WaitVisible(chromedp.CSS(emails+` button[value="resume"]`)))
		if got := paused(); !slices.Equal(got, []string{"emails"}) {
			t.Fatalf("after the page's pause the database lists %q paused, want emails alone", got)
		}
		if row := br.text(emails); !strings.Contains(row, "paused") {
			t.Errorf("the paused queue's line reads %q, want it marked paused", row)
		}

		// A POST without the session's token is refused, and resumes nothing.
		status := eval[int](br, `fetch("/ops/inbox/pause", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: "do=resume&queue=emails"}).then(r => r.status)`)
		if status != http.StatusForbidden || len(paused()) != 1 {
			t.Errorf("a POST without the session's token: %d, paused %q; want 403 and emails still paused", status, paused())
		}

		br.do(chromedp.Click(chromedp.CSS(emails+` button[value="resume"]`)),
			chromedp.WaitVisible(chromedp.CSS(emails+` button[value="pause"]`)))
		if got := paused(); len(got) != 0 {
			t.Errorf("after the page's resume the database lists %q paused, want none", got)
		}

		br.do(chromedp.Navigate(servePage(t, a, &ui.Config{ReadOnly: true})+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		if n := eval[int](br, `document.querySelectorAll("form.pause").length`); n != 0 {
			t.Errorf("the read-only page shows %d pause buttons, want none", n)
		}
	})
}
