package integration

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/ui"
)

// TestUIBulkCancelInABrowser: on a table with a CancelledAt column, the rows page cancels every
// row its filter matches (the count shown first: the queue's due rows, not another queue's, nor
// a delayed one) and a selection (a row in work among it asked of its consumer, through
// inbox_cancels); a POST of a cancel without the session's token is refused and cancels
// nothing; a table described without the column offers no cancel. On Postgres, MariaDB and
// SQLite.
func TestUIBulkCancelInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		createCancels(t, db, b)
		tbl := createdTable(tableName(t))
		tbl.CancelledAt = "cancelled_at"
		a := createAdminTable(t, b, db, tbl)
		var msgs []inbox.Message
		for range 5 {
			msgs = append(msgs, inbox.Message{Queue: "emails", Payload: []byte(`{}`)}) // 0–4 due
		}
		msgs = append(msgs,
			inbox.Message{Queue: "emails", Payload: []byte(`{}`), Delay: time.Hour}, // 5 delayed
			inbox.Message{Queue: "reports", Payload: []byte(`{}`)},                  // 6 due
			inbox.Message{Queue: "reports", Payload: []byte(`{}`)},                  // 7 in work
			inbox.Message{Queue: "reports", Payload: []byte(`{}`)},                  // 8 processed
		)
		ids := publishIDs(t, b, db, tbl, msgs...)
		setColumns(t, b, db, tbl, ids[7], map[string]any{"locked_until": time.Now().Add(time.Hour)})
		setColumns(t, b, db, tbl, ids[8], map[string]any{"processed_at": time.Now()})
		cancelled := func() []int64 {
			t.Helper()
			rows, err := db.Query("SELECT id FROM " + b.q(t, tbl.Name) + " WHERE " + b.q(t, "cancelled_at") + " IS NOT NULL ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				out = append(out, id)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}

		base := servePage(t, a, &ui.Config{CountEvery: time.Second})
		br := newBrowser(t, 1280, 900)

		// A POST without the session's token is refused, and cancels nothing.
		br.do(chromedp.Navigate(base+"/rows"), chromedp.WaitVisible(chromedp.CSS("table.rows")))
		status := eval[int](br, `fetch("/ops/inbox/act", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: "do=cancel&scope=matching&state=any&confirm=yes"}).then(r => r.status)`)
		if status != http.StatusForbidden {
			t.Errorf("a cancel's POST without the session's token: %d, want 403", status)
		}
		if c := cancelled(); len(c) != 0 {
			t.Fatalf("the refused POST cancelled rows %v", c)
		}

		// Every due row of emails.
		br.do(chromedp.Navigate(base+"/rows?state=due&queue=emails"),
			chromedp.Click(chromedp.CSS(`form.matching button[value="cancel"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#count`)))
		if c := br.text("#count"); !strings.Contains(c, "5 rows the filter matches are pending, and will be cancelled") {
			t.Errorf("before the cancel of every match: %q, want the 5 due rows of emails counted", c)
		}
		if c := cancelled(); len(c) != 0 {
			t.Fatalf("the count before the cancel cancelled rows %v", c)
		}
		br.do(chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#changed`)))
		if c := br.text("#changed"); c != "5" {
			t.Errorf("the cancel of every match changed %q rows, want 5", c)
		}
		if c := cancelled(); !slices.Equal(c, ids[:5]) {
			t.Errorf("cancelled rows %v, want the due rows of emails %v", c, ids[:5])
		}

		// A selection: a due row and a row in work of reports.
		br.do(chromedp.Navigate(base+"/rows?state=any&queue=reports"), chromedp.WaitVisible(chromedp.CSS("table.rows")),
			chromedp.Click(chromedp.CSS(`table.rows input[name="id"][value="`+itoa(ids[6])+`"]`)),
			chromedp.Click(chromedp.CSS(`table.rows input[name="id"][value="`+itoa(ids[7])+`"]`)),
			chromedp.Click(chromedp.CSS(`table.rows input[name="id"][value="`+itoa(ids[8])+`"]`)),
			chromedp.Click(chromedp.CSS(`button[form="selected"][value="cancel"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#count`)))
		if c := br.text("#count"); !strings.Contains(c, "2 of the 3 selected rows are pending") {
			t.Errorf("before the cancel of a selection: %q, want 2 of the 3 (one is processed)", c)
		}
		br.do(chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#changed`)))
		for sel, want := range map[string]string{"#changed": "1", "#in-work": "1", "#skipped": "1"} {
			if got := br.text(sel); !strings.HasPrefix(got, want+" ") && got != want {
				t.Errorf("the cancel of a selection: %s %q, want %s", sel, got, want)
			}
		}
		if c := cancelled(); !slices.Equal(c, append(ids[:5:5], ids[6])) {
			t.Errorf("cancelled rows %v, want those of emails and row %d", c, ids[6])
		}
		if n := count(t, db, "SELECT COUNT(*) FROM inbox_cancels WHERE table_name = "+b.dialect.Placeholder(1)+" AND id = "+b.dialect.Placeholder(2), tbl.Name, ids[7]); n != 1 {
			t.Errorf("the row in work: %d cancel requests recorded, want 1", n)
		}
		if r, err := a.Row(t.Context(), ids[5]); err != nil || r.State != admin.Delayed {
			t.Errorf("the delayed row of emails, not matched: %v, %v; want it delayed still", r.State, err)
		}

		// Described without the column, the table offers no cancel.
		plain := tbl
		plain.CancelledAt = ""
		pa, err := admin.New(db, b.dialect, plain)
		if err != nil {
			t.Fatal(err)
		}
		br.do(chromedp.Navigate(servePage(t, pa, nil)+"/rows?state=delayed"), chromedp.WaitVisible(chromedp.CSS("table.rows")))
		if n := eval[int](br, `document.querySelectorAll('button[value="cancel"]').length`); n != 0 {
			t.Errorf("a table without a cancelled_at column: %d cancel buttons", n)
		}
	})
}
