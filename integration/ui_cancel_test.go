package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/ui"
)

// TestUICancelInABrowser: on a table with a CancelledAt column, a queued row's page cancels it
// from its button (the row is then cancelled in the database, the page says so, and the
// overview counts it cancelled), and the cancelled row's page requeues it; a processed row's
// page offers neither, nor does a read-only page.
func TestUICancelInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		createCancels(t, db, b)
		tbl := createdTable(tableName(t))
		tbl.CancelledAt = "cancelled_at"
		a := createAdminTable(t, b, db, tbl)
		ids := publishIDs(t, b, db, tbl, inbox.Message{Queue: "emails", Payload: []byte(`{}`)}, inbox.Message{Queue: "emails", Payload: []byte(`{}`)})
		setColumns(t, b, db, tbl, ids[1], map[string]any{"processed_at": time.Now()})
		state := func(id int64) admin.State {
			t.Helper()
			r, err := a.Row(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r.State
		}

		base := servePage(t, a, nil)
		br := newBrowser(t, 1280, 900)
		br.do(chromedp.Navigate(base+"/rows/"+itoa(ids[0])),
			chromedp.Click(chromedp.CSS(`form.row-cancel button[value="cancel"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#done`)))
		if done := br.text("#done"); !strings.HasPrefix(done, "Cancelled") {
			t.Errorf("after the cancel the row's page says %q", done)
		}
		if s := state(ids[0]); s != admin.Cancelled {
			t.Fatalf("the row cancelled from its page is %v", s)
		}
		br.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`table.counts a[href$="state=cancelled"]`)))
		if n := br.text(`table.counts tbody a[href$="state=cancelled"]`); n != "1" {
			t.Errorf("the overview counts %q cancelled rows of emails, want 1", n)
		}

		br.do(chromedp.Navigate(base+"/rows/"+itoa(ids[0])),
			chromedp.Click(chromedp.CSS(`form.row-cancel button[value="requeue"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#done`)))
		if s := state(ids[0]); s != admin.Due {
			t.Errorf("the cancelled row requeued from its page is %v, want due", s)
		}

		br.do(chromedp.Navigate(base+"/rows/"+itoa(ids[1])), chromedp.WaitVisible(chromedp.CSS("h1")))
		if n := eval[int](br, `document.querySelectorAll("form.row-cancel").length`); n != 0 {
			t.Errorf("a processed row's page offers to cancel or requeue it")
		}
		br.do(chromedp.Navigate(servePage(t, a, &ui.Config{ReadOnly: true})+"/rows/"+itoa(ids[0])), chromedp.WaitVisible(chromedp.CSS("h1")))
		if n := eval[int](br, `document.querySelectorAll("form.row-cancel").length`); n != 0 {
			t.Errorf("a read-only page offers to cancel a row")
		}
	})
}
