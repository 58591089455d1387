package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/ui"
)

// The operator's page (package ui) in a real browser: headless Chromium (Debian's chromium
// package, which .ci/run installs), driven with chromedp, against live databases.

// browser is a headless Chromium of the test's own, with a fresh profile, that counts the
// JavaScript dialogs (alert, confirm, prompt) pages open, and closes each.
type browser struct {
	t       *testing.T
	ctx     context.Context
	dialogs atomic.Int32
}

// newBrowser starts Chromium for the test, and stops it when the test ends. Without Chromium
// the test is skipped, or fails where INBOX_REQUIRE_DATABASES=1 (CI installs it).
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		skipOrFail(t, "no chromium on PATH (apt-get install -y --no-install-recommends chromium): "+err.Error())
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height))
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	// The first action starts the browser, which lives as long as the context that action runs
	// with: run it with the browser's own, not with a step's, which ends with the step. Its
	// events can be listened to once it runs.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// stepTimeout bounds each step of a browser test: a page that never shows what a step waits
// for fails the test rather than hanging it.
const stepTimeout = time.Minute

// do runs steps, failing the test on an error.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval returns what a JavaScript expression evaluates to, awaiting a promise.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", js, err)
	}
	return v
}

// text is the text of the first element sel selects, once one is visible. It is read by a
// script of its own, after the wait: a node a step found may be gone by the next step, when a
// page replaced it.
func (b *browser) text(sel string) string {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(sel)))
	return eval[string](b, `document.querySelector(`+strconv.Quote(sel)+`).innerText`)
}

// servePage serves the page of a's table under /ops/inbox/, as an application mounts it, and
// returns the mount's URL.
func servePage(t *testing.T, a *admin.Admin, cfg *ui.Config) string {
	t.Helper()
	h, err := ui.New(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/inbox/", http.StripPrefix("/ops/inbox", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/ops/inbox"
}

const pageScript = `<script>alert(1)</script>`

// TestUIInABrowser drives the page in Chromium on each database: the token's refusal, the
// queues (one named with quotes), a filter typed into the form, a selection requeued, a retry
// now of every match, a page's rows deleted, a payload holding a script shown as text and never
// run, and an action's POST without the session's token refused.
func TestUIInABrowser(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres", "mariadb", "sqlite"), func(t *testing.T, b backend) {
		db, tbl, a := pageTable(t, b)
		now := time.Now()
		withScript := inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":42},"note":"` + pageScript + `"}`)}
		ids := publishIDs(t, b, db, tbl,
			inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":7}}`)},  // 0 dead
			inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":42}}`)}, // 1 dead
			withScript, // 2 dead
			inbox.Message{Queue: `it's "quoted"`, Payload: []byte(`{}`)},                // 3 dead
			inbox.Message{Queue: "emails", Payload: []byte(`{}`), Delay: time.Hour},     // 4 delayed
			inbox.Message{Queue: "emails", Payload: []byte(`{}`), Delay: 2 * time.Hour}, // 5 delayed
			inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":1}}`)},    // 6 due
			inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":2}}`)},    // 7 due
		)
		for _, id := range ids[:4] {
			setColumns(t, b, db, tbl, id, map[string]any{"dead_at": now, "attempt": 5, "last_error": "smtp " + pageScript})
		}
		rows := func(where string, args ...any) int {
			t.Helper()
			return count(t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE "+where, args...)
		}
		dead := b.q(t, "dead_at") + " IS NOT NULL"

		base := servePage(t, a, &ui.Config{Token: "t0ken", CountEvery: time.Second})
		br := newBrowser(t, 1280, 900)

		br.do(chromedp.Navigate(base + "/"))
		if body := br.text("body"); !strings.Contains(body, "unauthorized") {
			t.Errorf("the page without its token: %q, want it refused", body)
		}
		br.do(chromedp.Navigate(base+"/?token=t0ken"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		if counts := br.text("table.counts"); !strings.Contains(counts, `it's "quoted"`) {
			t.Errorf("the queues: %q, want the queue named with quotes, as it is named", counts)
		}

		// Filter through the form: the dead rows of emails whose customer is 42.
		br.do(chromedp.Navigate(base+"/rows"),
			chromedp.SetValue(chromedp.CSS(`form.filter select[name="state"]`), "dead"),
			chromedp.SendKeys(chromedp.CSS(`form.filter input[name="queue"]`), "emails"),
			chromedp.SendKeys(chromedp.CSS(`form.filter input[name="path"]`), "customer.id"),
			chromedp.SendKeys(chromedp.CSS(`form.filter input[name="value"]`), "42"),
			chromedp.Click(chromedp.CSS(`form.filter button[type="submit"]`)),
			// The page the filter loads writes the value it was given into its form.
			chromedp.WaitVisible(chromedp.CSS(`form.filter input[name="value"][value="42"]`)),
			chromedp.WaitVisible(chromedp.CSS(`table.rows`)))
		if n := eval[int](br, `document.querySelectorAll("table.rows tbody tr").length`); n != 2 {
			t.Errorf("the filter listed %d rows, want the 2 dead rows of emails whose customer is 42", n)
		}
		if cell := eval[string](br, `document.querySelector("table.rows tbody tr td.text code").textContent`); !strings.Contains(cell, pageScript) {
			t.Errorf("the payload of the newest row shows as %q, want its script as text", cell)
		}

		// The newest row's page shows its payload's script, and its last error's, as text.
		listing := eval[string](br, `location.href`)
		br.do(chromedp.Click(chromedp.CSS(`table.rows tbody a[href$="/rows/` + itoa(ids[2]) + `"]`)))
		if p := br.text("pre.payload"); !strings.Contains(p, pageScript) {
			t.Errorf("the row's payload shows as %q, want its script as text", p)
		}
		if e := br.text("dd pre.text"); e != "smtp "+pageScript {
			t.Errorf("the row's last error shows as %q, want %q", e, "smtp "+pageScript)
		}
		br.do(chromedp.Navigate(listing), chromedp.WaitVisible(chromedp.CSS(`table.rows`)))

		// Select the newest and requeue it.
		br.do(chromedp.Click(chromedp.CSS(`table.rows tbody input[name="id"]`)),
			chromedp.Click(chromedp.CSS(`button[form="selected"][value="requeue"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#count`)))
		if c := br.text("#count"); !strings.Contains(c, "1 of the 1 selected row is dead") {
			t.Errorf("before the requeue: %q", c)
		}
		br.do(chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#changed`)))
		if c := br.text("#changed"); c != "1" {
			t.Errorf("the requeue changed %q rows, want 1", c)
		}
		if n := rows(b.q(t, "id") + " = " + itoa(ids[2]) + " AND " + dead); n != 0 {
			t.Errorf("the requeued row is still dead")
		}

		// Retry now every delayed row of emails.
		br.do(chromedp.Navigate(base+"/rows?state=delayed&queue=emails"),
			chromedp.Click(chromedp.CSS(`form.matching button[value="retry now"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#count`)))
		if c := br.text("#count"); !strings.Contains(c, "2 rows the filter matches are delayed") {
			t.Errorf("before the retry now: %q", c)
		}
		br.do(chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#changed`)))
		if c := br.text("#changed"); c != "2" {
			t.Errorf("the retry now changed %q rows, want 2", c)
		}
		if n := rows(b.q(t, "retry_after")+" > "+b.dialect.Placeholder(1), b.dialect.Time(time.Now())); n != 0 {
			t.Errorf("%d rows still delayed after the retry now", n)
		}

		// Delete the due rows of emails: every row of the page, selected by the header's box.
		br.do(chromedp.Navigate(base+"/rows?state=due&queue=emails"), chromedp.WaitVisible(chromedp.CSS(`table.rows`)))
		due := eval[int](br, `document.querySelectorAll("table.rows tbody tr").length`)
		br.do(chromedp.Click(chromedp.CSS(`input[data-select-all]`)),
			chromedp.Click(chromedp.CSS(`button[form="selected"][value="delete"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
			chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#changed`)))
		if c := br.text("#changed"); c != itoa(int64(due)) {
			t.Errorf("the delete of a page of %d due rows changed %q", due, c)
		}

		// A POST without the session's token is refused, and changes nothing.
		before := rows("1 = 1")
		status := eval[int](br, `fetch("/ops/inbox/act", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: "do=delete&scope=matching&state=any&confirm=yes"}).then(r => r.status)`)
		if status != http.StatusForbidden {
			t.Errorf("a POST without the session's token: %d, want 403", status)
		}
		if after := rows("1 = 1"); after != before || after == 0 {
			t.Errorf("rows before the refused POST %d, after %d", before, after)
		}

		if n := br.dialogs.Load(); n != 0 {
			t.Errorf("the pages opened %d JavaScript dialogs: a script of a payload, an error or a name ran", n)
		}
		// The count above can fail: a page that does open a dialog is counted.
		br.do(chromedp.Navigate(`data:text/html,<script>alert(1)</script><p id="after">after</p>`))
		deadline := time.Now().Add(stepTimeout)
		for br.dialogs.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := br.dialogs.Load(); n != 1 {
			t.Errorf("a page that opens a dialog: %d dialogs counted, want 1", n)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestUIScreenshot writes the README's pictures of the page, docs/ui.png (the dead rows of a
// queue), docs/ui-queues.png (the queues) and docs/ui-groups.png (a queue's FIFO groups), into the directory INBOX_UI_SCREENSHOT names
// (INBOX_UI_SCREENSHOT=../docs go test -run TestUIScreenshot ./integration/), from a table on
// SQLite filled as a busy application's would be. Without the variable it is skipped.
func TestUIScreenshot(t *testing.T) {
	dir := os.Getenv("INBOX_UI_SCREENSHOT")
	if dir == "" {
		t.Skip("INBOX_UI_SCREENSHOT names no directory to write the pictures to")
	}
	b := backendNamed("sqlite", "")
	db := b.open(t, 4)
	tbl := createdTable("jobs")
	tbl.Kind, tbl.Pauses, tbl.GroupKey, tbl.CancelledAt = "kind", inbox.PausesTable, "group_key", "cancelled_at"
	st, err := inbox.PausesSchema(b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, st)
	a := createAdminTable(t, b, db, tbl)
	queues := []string{"emails", "invoices", "reports", "webhooks"}
	kinds := map[string][]string{"emails": {"receipt", "welcome"}, "invoices": {"monthly"}, "reports": {"daily", "weekly"}, "webhooks": {"order.paid"}}
	errs := []string{
		"smtp: 550 5.1.1 <%s>: mailbox unavailable",
		"POST https://hooks.example.com/orders: 503 Service Unavailable",
		"render invoice: template \"totals\": division by zero",
		"context deadline exceeded after 30s",
	}
	var msgs []inbox.Message
	for i := range 640 {
		q := queues[i%len(queues)]
		payload := fmt.Sprintf(`{"customer":{"id":%d,"email":"user%d@example.com"},"order":"A-%05d","amount":%d.%02d}`, 1000+i%97, i, 40000+i, 10+i%300, i%100)
		m := inbox.Message{Queue: q, Kind: kinds[q][i/len(queues)%len(kinds[q])], Payload: []byte(payload)}
		if q == "emails" || q == "webhooks" {
			m.GroupKey = fmt.Sprintf("customer-%d", 1000+i%17)
		}
		if i%9 == 4 {
			m.Delay = time.Duration(1+i%50) * time.Minute
		}
		msgs = append(msgs, m)
	}
	ids := publishIDs(t, b, db, tbl, msgs...)
	now := time.Now()
	for i, id := range ids {
		q := queues[i%len(queues)]
		switch {
		case i%7 == 3 && q != "reports":
			setColumns(t, b, db, tbl, id, map[string]any{"dead_at": now.Add(-time.Duration(i) * 41 * time.Second), "attempt": 25,
				"last_error": fmt.Sprintf(errs[i%len(errs)], fmt.Sprintf("user%d@example.com", i)), "created_at": now.Add(-time.Duration(i) * 3 * time.Minute)})
		case i%3 == 0:
			setColumns(t, b, db, tbl, id, map[string]any{"processed_at": now.Add(-time.Duration(i) * time.Minute), "attempt": 1})
		case i%11 == 5:
			setColumns(t, b, db, tbl, id, map[string]any{"locked_until": now.Add(20 * time.Second), "attempt": 1})
		case i%13 == 1:
			setColumns(t, b, db, tbl, id, map[string]any{"attempt": 2, "retry_after": now.Add(-time.Minute), "last_error": fmt.Sprintf(errs[i%len(errs)], "x@example.com")})
		default:
			setColumns(t, b, db, tbl, id, map[string]any{"created_at": now.Add(-time.Duration(640-i) * 7 * time.Second)})
		}
	}
	if err := a.Pause(context.Background(), "reports"); err != nil {
		t.Fatal(err)
	}
	base := servePage(t, a, &ui.Config{Title: "orders-db (sqlite)"})
	br := newBrowser(t, 1280, 760)
	for _, shot := range []struct {
		path, file, wait string
		height           int64
	}{
		{"/", "ui-queues.png", "table.counts", 640},
		{"/rows?state=dead&queue=emails", "ui.png", "table.rows", 760},
		{"/groups?queue=emails", "ui-groups.png", "table.groups", 640},
	} {
		br.do(chromedp.EmulateViewport(1280, shot.height), chromedp.Navigate(base+shot.path), chromedp.WaitVisible(chromedp.CSS(shot.wait)))
		ctx, cancel := context.WithTimeout(br.ctx, stepTimeout)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, shot.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
