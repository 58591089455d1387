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

// TestUIKindsInABrowser: on a table of jobs of several kinds, the overview counts each queue's
// rows per kind under the queue, a kind's link lists only its rows, the kind typed into the
// filter's form does the same (a kind named with markup shown as text), and a row's page
// names its kind; admin.Rows filtered by kinds takes those rows only.
func TestUIKindsInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := createdTable(tableName(t))
		tbl.Kind = "kind"
		a := createAdminTable(t, b, db, tbl)
		odd := `report "q" ` + pageScript
		msgs := []inbox.Message{
			{Queue: "emails", Kind: "welcome", Payload: []byte(`{}`)},
			{Queue: "emails", Kind: "welcome", Payload: []byte(`{}`)},
			{Queue: "emails", Kind: odd, Payload: []byte(`{}`)},
			{Queue: "reports", Kind: "welcome", Payload: []byte(`{}`)},
		}
		ids := publishIDs(t, b, db, tbl, msgs...)
		listed, err := a.Rows(context.Background(), admin.Filter{Queues: []string{"emails"}, Kinds: []string{"welcome"}}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 2 || listed[0].ID != ids[1] || listed[1].ID != ids[0] || listed[0].Kind != "welcome" {
			t.Fatalf("admin.Rows of the welcome jobs of emails: %+v, want rows %d and %d", listed, ids[1], ids[0])
		}

		base := servePage(t, a, &ui.Config{CountEvery: time.Second})
		br := newBrowser(t, 1280, 900)
		br.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts tr.kind")))
		if n := eval[int](br, `document.querySelectorAll("table.counts tbody tr.kind").length`); n != 3 {
			t.Errorf("the overview has %d lines of kinds, want 3 (two under emails, one under reports)", n)
		}
		if counts := br.text("table.counts"); !strings.Contains(counts, odd) {
			t.Errorf("the overview %q lacks the kind %q, as text", counts, odd)
		}
		br.do(chromedp.Click(chromedp.CSS(`table.counts tr.kind a.state.due[href*="queue=emails"][href*="kind=welcome"]`)),
			chromedp.WaitVisible(chromedp.CSS("table.rows")))
		if n := eval[int](br, `document.querySelectorAll("table.rows tbody tr").length`); n != 2 {
			t.Errorf("the due welcome jobs of emails: %d rows listed, want 2", n)
		}

		br.do(chromedp.Navigate(base+"/rows?state=any"),
			chromedp.SendKeys(chromedp.CSS(`form.filter input[name="kind"]`), odd),
			chromedp.Click(chromedp.CSS(`form.filter button[type="submit"]`)),
			// The page the filter loads names the kind in its heading.
			chromedp.WaitVisible(chromedp.CSS(`h1 span.kind`)),
			chromedp.WaitVisible(chromedp.CSS(`table.rows`)))
		if n := eval[int](br, `document.querySelectorAll("table.rows tbody tr").length`); n != 1 {
			t.Errorf("the rows of kind %q: %d listed, want 1", odd, n)
		}
		if k := br.text("table.rows tbody td.kind"); k != odd {
			t.Errorf("the listed row's kind shows as %q, want %q", k, odd)
		}
		br.do(chromedp.Click(chromedp.CSS(`table.rows tbody a[href$="/rows/`+itoa(ids[2])+`"]`)), chromedp.WaitVisible(chromedp.CSS("dd.kind")))
		if k := br.text("dd.kind"); k != odd {
			t.Errorf("the row's page names its kind %q, want %q", k, odd)
		}
		if n := br.dialogs.Load(); n != 0 {
			t.Errorf("the pages opened %d JavaScript dialogs: a kind's name ran as a script", n)
		}
	})
}
