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

// TestUILimitsInABrowser: where the description names a limits and a rates table, the page's
// Limits view lists each concurrency limit with its rows in work now (a limit key of markup
// shown as text, never run) and each rate with the starts of its last interval; its forms set
// a limit and a rate, and its buttons clear them (the database then lists them so); a POST
// without the session's token is refused, a read-only page shows no form, and a table that
// names neither table shows no Limits view. On Postgres, MariaDB and SQLite.
func TestUILimitsInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := b.newLimitTable(t, db)
		tbl.Rates = inbox.RatesTable
		st, err := inbox.RatesSchema(b.dialect, tbl)
		must(t, "RatesSchema", err)
		ratesCreate.Lock()
		mustExec(t, db, st)
		ratesCreate.Unlock()
		t.Cleanup(func() {
			db.Exec("DELETE FROM "+inbox.RatesTable+" WHERE table_name = "+b.placeholders(1), tbl.Name)
		})
		a, err := admin.New(db, b.dialect, tbl)
		must(t, "admin.New", err)
		if c := a.Capabilities(); !c.Limits || !c.Rates {
			t.Fatalf("Capabilities of a table naming a limits and a rates table: %+v", c)
		}
		must(t, "SetLimit", a.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerKind, Key: "k", Max: 2}))
		must(t, "SetLimit", a.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerKey, Key: pageScript, Max: 3}))
		must(t, "SetRate", a.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "k", Starts: 5, Per: time.Minute}))
		publishIDs(t, b, db, tbl, inbox.Message{Queue: "q", Kind: "k", Payload: []byte(`{}`)}, inbox.Message{Queue: "q", Kind: "k", Payload: []byte(`{}`)})
		f := openForm(t, lease.New(b.dialect, tbl, nil), db, inbox.Binding{Name: "q"})
		held := claim(t, f, 1)
		if len(held) != 1 {
			t.Fatalf("claimed %d rows, want 1", len(held))
		}
		defer settle(t, f, held[0], outcome.Ack())

		base := servePage(t, a, &ui.Config{CountEvery: time.Hour})
		br := newBrowser(t, 1280, 900)
		br.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`header nav a[href$="/limits"]`)),
			chromedp.Click(chromedp.CSS(`header nav a[href$="/limits"]`)), chromedp.WaitVisible(chromedp.CSS("table.limits")))
		lines := func(table string) []string {
			return eval[[]string](br, `[...document.querySelectorAll("table.`+table+` tbody tr")].map(e => e.innerText.trim())`)
		}
		limits := lines("limits")
		for _, want := range []string{"q\tkind\tk\t2\t1", "q\tkey\t" + pageScript + "\t3\t0"} {
			if !slices.ContainsFunc(limits, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("the limits read %q, want a line %q (queue, scope, key, max, in work)", limits, want)
			}
		}
		if rates := lines("rates"); len(rates) != 1 || !strings.HasPrefix(rates[0], "q\tkind\tk\t5\t1m0s\t1") {
			t.Errorf("the rates read %q, want q, kind k, 5 per 1m0s, 1 start in the last interval", rates)
		}

		// Set a limit and a rate from the forms, then clear them from their lines' buttons.
		rLimit := `table.limits tr:has(input[name="queue"][value="it's \"r\""])`
		emailsRate := `table.rates tr:has(input[name="queue"][value="emails"])`
		br.do(chromedp.SetValue(chromedp.CSS(`#set-limit input[name="queue"]`), `it's "r"`),
			chromedp.SetValue(chromedp.CSS(`#set-limit input[name="max"]`), "4"),
			chromedp.Click(chromedp.CSS(`#set-limit button[value="set-limit"]`)), chromedp.WaitVisible(chromedp.CSS(rLimit)))
		list, err := a.Limits(ctx)
		must(t, "Limits", err)
		if !slices.ContainsFunc(list, func(l inbox.Limit) bool { return l.Queue == `it's "r"` && l.Scope == inbox.LimitPerQueue && l.Max == 4 }) {
			t.Errorf("after the page's set the database lists %+v, want a limit of 4 on queue it's \"r\"", list)
		}
		br.do(chromedp.SetValue(chromedp.CSS(`#set-rate input[name="queue"]`), "emails"),
			chromedp.SetValue(chromedp.CSS(`#set-rate select[name="scope"]`), "key"),
			chromedp.SetValue(chromedp.CSS(`#set-rate input[name="key"]`), "tenant-7"),
			chromedp.SetValue(chromedp.CSS(`#set-rate input[name="starts"]`), "10"),
			chromedp.SetValue(chromedp.CSS(`#set-rate input[name="per"]`), "1s"),
			chromedp.Click(chromedp.CSS(`#set-rate button[value="set-rate"]`)), chromedp.WaitVisible(chromedp.CSS(emailsRate)))
		if msg := br.text("#done"); !strings.HasPrefix(msg, "Rate set") {
			t.Errorf("the page after setting a rate says %q", msg)
		}
		rates, err := a.Rates(ctx)
		must(t, "Rates", err)
		if !slices.ContainsFunc(rates, func(r inbox.Rate) bool {
			return r.Queue == "emails" && r.Scope == inbox.LimitPerKey && r.Key == "tenant-7" && r.Starts == 10 && r.Per == time.Second
		}) {
			t.Errorf("after the page's set the database lists %+v, want a rate of 10 per 1s on key tenant-7 of emails", rates)
		}

		// A POST without the session's token is refused, and clears nothing.
		status := eval[int](br, `fetch("/ops/inbox/limits", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: "do=clear-rate&queue=emails"}).then(r => r.status)`)
		if rates, _ := a.Rates(ctx); status != http.StatusForbidden || len(rates) != 2 {
			t.Errorf("a POST without the session's token: %d, rates %+v; want 403 and both rates kept", status, rates)
		}

		// Each step waits for the page the last one loads: a #done of the page before is there
		// until it is replaced.
		br.do(chromedp.Click(chromedp.CSS(rLimit+` button[value="clear-limit"]`)), chromedp.WaitNotPresent(chromedp.CSS(rLimit)),
			chromedp.Click(chromedp.CSS(emailsRate+` button[value="clear-rate"]`)), chromedp.WaitNotPresent(chromedp.CSS(emailsRate)))
		if list, _ := a.Limits(ctx); len(list) != 2 {
			t.Errorf("after the page's clear the database lists the limits %+v, want the two set before", list)
		}
		if rates, _ := a.Rates(ctx); len(rates) != 1 || rates[0].Queue != "q" {
			t.Errorf("after the page's clear the database lists the rates %+v, want q's alone", rates)
		}
		if n := br.dialogs.Load(); n != 0 {
			t.Errorf("the pages opened %d JavaScript dialogs: a limit's key ran as a script", n)
		}

		br.do(chromedp.Navigate(servePage(t, a, &ui.Config{ReadOnly: true})+"/limits"), chromedp.WaitVisible(chromedp.CSS("table.limits")))
		if n := eval[int](br, `document.querySelectorAll("main form").length`); n != 0 {
			t.Errorf("the read-only limits view shows %d forms, want none", n)
		}

		// Described without its limits and rates tables, the table shows no Limits view.
		plain := tbl
		plain.Limits, plain.Rates = "", ""
		pa, err := admin.New(db, b.dialect, plain)
		must(t, "admin.New", err)
		br.do(chromedp.Navigate(servePage(t, pa, nil)+"/"), chromedp.WaitVisible(chromedp.CSS("header nav")))
		if n := eval[int](br, `document.querySelectorAll('header nav a[href$="/limits"]').length`); n != 0 {
			t.Error("a table without limits or rates has a link to the limits view")
		}
		if status := eval[int](br, `fetch("/ops/inbox/limits").then(r => r.status)`); status != http.StatusNotFound {
			t.Errorf("the limits view of a table without limits or rates: %d, want 404", status)
		}
	})
}
