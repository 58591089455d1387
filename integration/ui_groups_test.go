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
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/ui"
)

// TestUIGroupsInABrowser: on a table with FIFO groups, the page's groups view lists each group
// with rows pending, by queue and key (a key of markup shown as text, never run), with its head,
// backlog and what it waits for (held by the row a consumer claimed, blocked by a head that
// retries later, or free); the queue typed into its form lists that queue's groups alone
// (admin.QueueGroups), "blocked only" the blocked one, and a head's link opens the head's row. A
// table described without a group column shows no groups view. On Postgres, MariaDB and SQLite.
func TestUIGroupsInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := b.newGroupTable(t, db)
		ids := publishIDs(t, b, db, tbl,
			inbox.Message{Queue: "emails", GroupKey: "held", Payload: []byte(`{}`)},     // 0 held: its head in work
			inbox.Message{Queue: "emails", GroupKey: "held", Payload: []byte(`{}`)},     // 1
			inbox.Message{Queue: "emails", GroupKey: pageScript, Payload: []byte(`{}`)}, // 2 free
			inbox.Message{Queue: "emails", GroupKey: pageScript, Payload: []byte(`{}`)}, // 3
			inbox.Message{Queue: "emails", GroupKey: "acme", Payload: []byte(`{}`)},     // 4 blocked: its head retries later
			inbox.Message{Queue: "emails", GroupKey: "acme", Payload: []byte(`{}`)},     // 5
			inbox.Message{Queue: "emails", GroupKey: "acme", Payload: []byte(`{}`)},     // 6
			inbox.Message{Queue: "emails", GroupKey: "done", Payload: []byte(`{}`)},     // 7 processed: no group pending
			inbox.Message{Queue: "emails", Payload: []byte(`{}`)},                       // 8 of no group
			inbox.Message{Queue: `it's "r"`, GroupKey: "acme", Payload: []byte(`{}`)},   // 9 another queue's group
		)
		setColumns(t, b, db, tbl, ids[4], map[string]any{"attempt": 3, "retry_after": time.Now().Add(time.Hour), "last_error": "boom"})
		setColumns(t, b, db, tbl, ids[7], map[string]any{"processed_at": time.Now()})
		f := openForm(t, lease.New(b.dialect, tbl, nil), db, inbox.Binding{Name: "emails"})
		held := claim(t, f, 1)
		if len(held) != 1 || held[0].ID != ids[0] {
			t.Fatalf("claimed %v, want the head of group held, row %d", deliveryIDs(held), ids[0])
		}
		defer settle(t, f, held[0], outcome.Ack())
		a, err := admin.New(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Capabilities().Groups {
			t.Fatal("Capabilities of a table with a group column: no Groups")
		}
		if of, err := a.QueueGroups(ctx, `it's "r"`, 10); err != nil || len(of) != 1 || of[0].Head != ids[9] {
			t.Fatalf(`QueueGroups(it's "r"): %+v, %v; want its group acme alone, head %d`, of, err, ids[9])
		}

		base := servePage(t, a, &ui.Config{CountEvery: time.Second})
		br := newBrowser(t, 1280, 900)
		// The view opens on the first queue the counts name: emails.
		br.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`header nav a[href$="/groups"]`)),
			chromedp.Click(chromedp.CSS(`header nav a[href$="/groups"]`)), chromedp.WaitVisible(chromedp.CSS("table.groups")))
		if h := br.text("h1"); h != "Groups of emails" {
			t.Errorf("the groups view opens as %q, want the groups of emails", h)
		}
		// Ordered by key, by the database's collation, which may sort '<' apart.
		keys := eval[[]string](br, `[...document.querySelectorAll("table.groups tbody th.group")].map(e => e.textContent)`)
		if slices.Sort(keys); strings.Join(keys, "|") != strings.Join([]string{pageScript, "acme", "held"}, "|") {
			t.Errorf("the groups of emails are keyed %q, want %s, acme and held", keys, pageScript)
		}
		waits := map[string]string{}
		for _, line := range eval[[]string](br, `[...document.querySelectorAll("table.groups tbody tr")].map(e => e.innerText)`) {
			fields := strings.Split(line, "\t")
			waits[fields[0]+"/"+fields[1]] = line
		}
		for key, w := range map[string]string{"emails/held": "held by row " + itoa(ids[0]), "emails/acme": "blocked until its head's retry", "emails/" + pageScript: "free"} {
			if !strings.Contains(waits[key], w) {
				t.Errorf("the line of group %s: %q, want it to say %q", key, waits[key], w)
			}
		}
		if line := waits["emails/acme"]; !strings.Contains(line, "\t"+itoa(ids[4])+"\t3\t3\t") {
			t.Errorf("the line of group acme of emails: %q, want its head %d, 3 pending, attempt 3", line, ids[4])
		}
		br.do(chromedp.Click(chromedp.CSS(`form.filter input[name="blocked"]`)),
			chromedp.Click(chromedp.CSS(`form.filter button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`form.filter input[name="blocked"][checked]`)))
		if keys := eval[[]string](br, `[...document.querySelectorAll("table.groups tbody th.group")].map(e => e.textContent)`); len(keys) != 1 || keys[0] != "acme" {
			t.Errorf("the blocked groups of emails: %q, want acme alone", keys)
		}

		// Another queue, typed into the form, named with quotes.
		br.do(chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(chromedp.CSS("table.groups")),
			chromedp.SetValue(chromedp.CSS(`form.filter input[name="queue"]`), `it's "r"`),
			chromedp.Click(chromedp.CSS(`form.filter button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`nav.tabs a[aria-current="page"][href*="queue=it"]`)))
		if lines := eval[[]string](br, `[...document.querySelectorAll("table.groups tbody tr")].map(e => e.innerText)`); len(lines) != 1 || !strings.HasPrefix(lines[0], "it's \"r\"\tacme\t"+itoa(ids[9])+"\t1\t") || !strings.Contains(lines[0], "free") {
			t.Errorf("the groups of it's \"r\": %q, want acme alone, head %d, free", lines, ids[9])
		}

		br.do(chromedp.Navigate(base+"/groups?queue=emails"), chromedp.WaitVisible(chromedp.CSS("table.groups")),
			chromedp.Click(chromedp.CSS(`table.groups tbody a[href$="/rows/`+itoa(ids[2])+`"]`)),
			chromedp.WaitVisible(chromedp.CSS("h1")))
		if url := eval[string](br, `location.pathname`); !strings.HasSuffix(url, "/rows/"+itoa(ids[2])) {
			t.Errorf("the head's link of the group %q opened %s, want its row %d", pageScript, url, ids[2])
		}
		if n := br.dialogs.Load(); n != 0 {
			t.Errorf("the pages opened %d JavaScript dialogs: a group's key ran as a script", n)
		}

		// Described without its group column, the table shows no groups view.
		plain := tbl
		plain.GroupKey = ""
		pa, err := admin.New(db, b.dialect, plain)
		if err != nil {
			t.Fatal(err)
		}
		br.do(chromedp.Navigate(servePage(t, pa, nil)+"/"), chromedp.WaitVisible(chromedp.CSS("header nav")))
		if n := eval[int](br, `document.querySelectorAll('header nav a[href$="/groups"]').length`); n != 0 {
			t.Error("a table without a group column has a link to the groups view")
		}
		if status := eval[int](br, `fetch("/ops/inbox/groups").then(r => r.status)`); status != http.StatusNotFound {
			t.Errorf("the groups view of a table without a group column: %d, want 404", status)
		}
	})
}
