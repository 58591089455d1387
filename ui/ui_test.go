package ui_test

import (
	"database/sql/driver"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/ui"
)

// The page's handler against a fake database (fakeDB) on SQLite's dialect: what it shows and
// escapes, what it refuses, and what it runs. The live databases and a real browser drive it
// in integration/ui_browser_test.go.

var jobs = inbox.Table{
	Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at",
	Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers", DeadAt: "dead_at",
	LastError: "last_error", CreatedAt: "created_at", LockedUntil: "locked_until",
}

const (
	script      = `<script>alert(1)</script>`
	quotedQueue = `it's "q"`
)

// answers are a table of one dead row (id 3, queue it's "q") whose payload, last error and
// headers hold markup, and its counts.
func answers() []answer {
	payload := []byte(`{"html":"` + script + `"}`)
	return []answer{
		{key: "COUNT(CASE WHEN", columns: make([]string, 9), rows: [][]driver.Value{{quotedQueue, int64(0), int64(0), int64(0), int64(1), int64(1), int64(0), nil, int64(0)}}},
		{key: "(SELECT MIN(", columns: []string{"lo", "hi"}, rows: [][]driver.Value{{int64(1), int64(3)}}},
		{key: "SELECT COUNT(*) FROM (", columns: []string{"n"}, rows: [][]driver.Value{{int64(1)}}},
		{key: "SUBSTR(COALESCE(", columns: make([]string, 12), rows: [][]driver.Value{{
			int64(3), quotedQueue, int64(5), int64(0), nil, nil, "2026-01-01 00:00:00.000000", nil, "2025-12-31 00:00:00.000000", script, payload, "",
		}}},
		{key: "`headers`, `dead_at`", columns: make([]string, 12), rows: [][]driver.Value{{
			int64(3), payload, int64(5), nil, quotedQueue, int64(0), nil, `{"h":"` + script + `"}`, "2026-01-01 00:00:00.000000", script, "2025-12-31 00:00:00.000000", nil,
		}}},
		{key: "SELECT `id` FROM `jobs` WHERE `id` IN", columns: []string{"id"}, rows: [][]driver.Value{{int64(3)}}},
		{key: "DELETE FROM", changed: 1},
	}
}

// page serves the page of jobs over f with cfg, mounted under /ops/inbox/ as an application
// would mount it.
func page(t *testing.T, f *fakeDB, cfg *ui.Config) *httptest.Server {
	t.Helper()
	return pageOf(t, f, cfg, jobs)
}

// pageOf is page of table tbl.
func pageOf(t *testing.T, f *fakeDB, cfg *ui.Config, tbl inbox.Table) *httptest.Server {
	t.Helper()
	a, err := admin.New(f.open(t), dialect.SQLite[isolation.Default]{}, tbl)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/inbox/", http.StripPrefix("/ops/inbox", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// client is a browser's session: it keeps cookies, and does not follow redirects.
type client struct {
	t    *testing.T
	srv  *httptest.Server
	http *http.Client
}

func newClient(t *testing.T, srv *httptest.Server) *client {
	jar := &cookieJar{}
	return &client{t: t, srv: srv, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request to path under the mount, and returns the response and its body.
func (c *client) do(method, path string, form url.Values, header http.Header) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.srv.URL+"/ops/inbox"+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

func (c *client) get(path string) (*http.Response, string) { return c.do("GET", path, nil, nil) }

// csrf is the session's token as a page's form carries it.
var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *client) csrf(body string) string {
	c.t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("the page has no form with the session's token:\n%s", body)
	}
	return m[1]
}

func TestPagesEscapeNamesPayloadsAndErrors(t *testing.T) {
	f := &fakeDB{answers: answers()}
	c := newClient(t, page(t, f, nil))
	for _, path := range []string{"/", "/rows?state=dead", "/rows/3"} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s: the markup of a name, payload or error reached the page unescaped:\n%s", path, body)
		}
		if !strings.Contains(body, `it&#39;s &#34;q&#34;`) {
			t.Errorf("GET %s: the queue named with quotes is not shown, escaped", path)
		}
		if path != "/" && !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("GET %s: the payload's or the error's markup is not shown as text", path)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q, want the page's own scripts only", path, csp)
		}
	}
}

// TestOverviewMarksPausedQueues: where the description names a pauses table, the overview
// marks the queue the table lists paused, and one that has no rows is listed too; without one,
// nothing is marked and the pauses table is not read.
func TestOverviewMarksPausedQueues(t *testing.T) {
	pausable := jobs
	pausable.Pauses = inbox.PausesTable
	listed := answer{key: "FROM `inbox_pauses`", columns: []string{"queue_name", "paused_at"}, rows: [][]driver.Value{
		{quotedQueue, "2026-01-01 00:00:00.000000"}, {"idle", "2026-01-02 00:00:00.000000"},
	}}
	f := &fakeDB{answers: append([]answer{listed}, answers()...)}
	_, body := newClient(t, pageOf(t, f, nil, pausable)).get("/")
	if got := strings.Count(body, `<span class="paused"`); got != 2 || !strings.Contains(body, `it&#39;s &#34;q&#34;</a> <span class="paused"`) || !strings.Contains(body, `idle</a> <span class="paused"`) {
		t.Errorf("the overview marks %d queues paused, want it's \"q\" and idle:\n%s", got, body)
	}
	f = &fakeDB{answers: append([]answer{listed}, answers()...)}
	_, body = newClient(t, page(t, f, nil)).get("/")
	if strings.Contains(body, `class="paused"`) || len(f.statements("inbox_pauses")) != 0 {
		t.Errorf("without a pauses table the overview read it or marked a queue paused:\n%s", body)
	}
}

func TestPagesLinkUnderTheirMount(t *testing.T) {
	c := newClient(t, page(t, &fakeDB{answers: answers()}, nil))
	resp, body := c.get("/rows?state=dead")
	for _, link := range []string{`href="/ops/inbox/static/ui.css"`, `href="/ops/inbox/rows/3"`, `action="/ops/inbox/act"`} {
		if !strings.Contains(body, link) {
			t.Errorf("the rows page has no %s", link)
		}
	}
	var csrfPath string
	for _, ck := range resp.Cookies() {
		if ck.Name == "inbox_csrf" {
			csrfPath = ck.Path
		}
	}
	if csrfPath != "/ops/inbox/" {
		t.Errorf("the session's cookie has path %q, want the mount's, /ops/inbox/", csrfPath)
	}
	if resp, _ := c.get(""); resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/ops/inbox/" {
		t.Errorf("GET the mount without its slash: %s to %q, want a redirect to /ops/inbox/", resp.Status, resp.Header.Get("Location"))
	}
}

// TestActionsAskTheSessionToken: an action's POST without the session's token, or with
// another, is refused and runs nothing; with it, the action shows its count first, and runs
// when confirmed.
func TestActionsAskTheSessionToken(t *testing.T) {
	f := &fakeDB{answers: answers()}
	c := newClient(t, page(t, f, nil))
	_, body := c.get("/rows?state=dead")
	token := c.csrf(body)
	act := url.Values{"do": {"delete"}, "scope": {"selected"}, "id": {"3"}, "state": {"dead"}, "confirm": {"yes"}}

	for name, tok := range map[string]string{"no token": "", "another token": strings.Repeat("x", 43)} {
		form := cloneValues(act)
		if tok != "" {
			form.Set("csrf", tok)
		}
		resp, body := c.do("POST", "/act", form, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "session token") {
			t.Errorf("%s: %s, want 403 naming the session token", name, resp.Status)
		}
	}
	form := cloneValues(act)
	form.Set("csrf", token)
	if resp, _ := c.do("POST", "/act", form, http.Header{"Sec-Fetch-Site": {"cross-site"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST from another site, with the token: %s, want 403", resp.Status)
	}
	if got := f.statements("DELETE"); len(got) != 0 {
		t.Fatalf("refused POSTs ran %q", got)
	}

	form.Del("confirm")
	resp, body := c.do("POST", "/act", form, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "1 of the 1 selected row") || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("the action's first POST: %s, want its count and a confirmation:\n%s", resp.Status, body)
	}
	if got := f.statements("DELETE"); len(got) != 0 {
		t.Fatalf("the action ran before it was confirmed: %q", got)
	}
	form.Set("confirm", "yes")
	resp, body = c.do("POST", "/act", form, nil)
	if resp.StatusCode != http.StatusOK || !regexp.MustCompile(`id="changed">1<`).MatchString(body) {
		t.Errorf("the confirmed action: %s, want 1 row changed:\n%s", resp.Status, body)
	}
	if got := f.statements("DELETE"); len(got) != 1 {
		t.Errorf("the confirmed action ran %q, want one DELETE", got)
	}
}

func TestReadOnlyShowsNoActionAndRefusesThem(t *testing.T) {
	f := &fakeDB{answers: answers()}
	c := newClient(t, page(t, f, &ui.Config{ReadOnly: true}))
	for _, path := range []string{"/rows?state=dead", "/rows/3"} {
		_, body := c.get(path)
		if strings.Contains(body, `action="/ops/inbox/act"`) || strings.Contains(body, `type="checkbox"`) || !strings.Contains(body, "read-only") {
			t.Errorf("GET %s, read-only: the page offers an action, or does not say it is read-only:\n%s", path, body)
		}
	}
	resp, _ := c.do("POST", "/act", url.Values{"do": {"delete"}, "scope": {"selected"}, "id": {"3"}, "confirm": {"yes"}}, nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST of an action, read-only: %s, want 403", resp.Status)
	}
	if got := f.statements("DELETE"); len(got) != 0 {
		t.Errorf("a read-only page ran %q", got)
	}
}

func TestTokenAndBasicAuthentication(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		c := newClient(t, page(t, &fakeDB{answers: answers()}, &ui.Config{Token: "s3cret"}))
		for _, path := range []string{"/", "/rows", "/static/ui.css", "/?token=wrong"} {
			if resp, _ := c.get(path); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s without the token: %s, want 401", path, resp.Status)
			}
		}
		resp, _ := c.get("/rows?state=dead&token=s3cret")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/inbox/rows?state=dead" {
			t.Fatalf("GET with ?token=: %s to %q, want a redirect to the page without the token", resp.Status, resp.Header.Get("Location"))
		}
		if resp, _ := c.get("/rows?state=dead"); resp.StatusCode != http.StatusOK {
			t.Errorf("GET with the token's cookie: %s, want 200", resp.Status)
		}
		other := newClient(t, c.srv)
		if resp, _ := other.do("GET", "/", nil, http.Header{"Authorization": {"Bearer s3cret"}}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET with the token as a bearer: %s, want 200", resp.Status)
		}
		if resp, body := other.get("/healthz"); resp.StatusCode != http.StatusOK || body != "ok\n" {
			t.Errorf("GET /healthz without the token: %s %q, want 200 ok: a load balancer has no token", resp.Status, body)
		}
	})
	t.Run("basic", func(t *testing.T) {
		c := newClient(t, page(t, &fakeDB{answers: answers()}, &ui.Config{User: "ops", Password: "pw"}))
		resp, _ := c.get("/")
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("GET without credentials: %s, %q; want 401 asking for basic credentials", resp.Status, resp.Header.Get("WWW-Authenticate"))
		}
		for _, pw := range []string{"wrong", "pw"} {
			req, _ := http.NewRequest("GET", c.srv.URL+"/ops/inbox/", nil)
			req.SetBasicAuth("ops", pw)
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := map[string]int{"wrong": http.StatusUnauthorized, "pw": http.StatusOK}[pw]
			if resp.StatusCode != want {
				t.Errorf("GET with password %q: %s, want %d", pw, resp.Status, want)
			}
		}
	})
	if _, err := ui.New(nil, &ui.Config{Password: "pw"}); err == nil {
		t.Error("ui.New with a password and no user: no error")
	}
}

func TestHealthPingsTheDatabase(t *testing.T) {
	f := &fakeDB{answers: answers()}
	c := newClient(t, page(t, f, nil))
	if resp, body := c.get("/healthz"); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz: %s %q, want 200 ok", resp.Status, body)
	}
	f.pingErr = errors.New("connection refused to postgres://ops:hunter2@db")
	resp, body := c.get("/healthz")
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "hunter2") {
		t.Errorf("GET /healthz, database down: %s %q; want 503, and the error kept to the log", resp.Status, body)
	}
}

// TestPageQueriesEndAtTheirTimeout: a page whose query does not end is answered when
// QueryTimeout runs out, with what to narrow, and its query's context ends then.
func TestPageQueriesEndAtTheirTimeout(t *testing.T) {
	f := &fakeDB{answers: append([]answer{{key: "SUBSTR(COALESCE(", block: true}}, answers()...)}
	c := newClient(t, page(t, f, &ui.Config{QueryTimeout: 100 * time.Millisecond}))
	resp, body := c.get("/rows?state=dead")
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "narrow the filter") {
		t.Errorf("a listing whose query does not end: %s, want 504 saying what to narrow:\n%s", resp.Status, body)
	}
}

func TestFilterFieldsAreRead(t *testing.T) {
	f := &fakeDB{answers: answers()}
	c := newClient(t, page(t, f, nil))
	for _, bad := range []string{"state=sleeping", "from=x", "older=soon", "value=42"} {
		if resp, body := c.get("/rows?" + bad); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `class="error"`) {
			t.Errorf("GET /rows?%s: %s, want 400 with the error shown", bad, resp.Status)
		}
	}
	if resp, _ := c.get("/rows?state=dead&queue=%22%22&from=1&to=3&older=7d&error=550&path=customer.id&value=42"); resp.StatusCode != http.StatusOK {
		t.Errorf("a filter of every field: %s", resp.Status)
	}
	got := f.statements("SUBSTR(COALESCE(")
	if len(got) == 0 || !strings.Contains(got[len(got)-1], "json_extract") || !strings.Contains(got[len(got)-1], "`queue` IN (?)") {
		t.Errorf("the listing of every field: %q", got)
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// TestEveryMatchOfAnUnindexedFilterIsBounded: an action over every row a filter on the payload
// matches, given no id range, takes the ids a listing reads, says so, and counts only those.
func TestEveryMatchOfAnUnindexedFilterIsBounded(t *testing.T) {
	f := &fakeDB{answers: answers()}
	c := newClient(t, page(t, f, nil))
	_, body := c.get("/rows?state=dead")
	form := url.Values{"csrf": {c.csrf(body)}, "do": {"delete"}, "scope": {"matching"}, "state": {"dead"}, "path": {"customer.id"}, "value": {"42"}}
	resp, body := c.do("POST", "/act", form, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="bounded"`) || !strings.Contains(body, `name="from" value="1"`) || !strings.Contains(body, `name="to" value="3"`) {
		t.Errorf("the confirmation of a delete of every payload match: %s, want the ids bounded, and carried by its form:\n%s", resp.Status, body)
	}
	counts := f.statements("SELECT COUNT(*) FROM (")
	if len(counts) != 1 || !strings.Contains(counts[0], "`id` >= ? AND `id` <= ?") {
		t.Errorf("the count before the action: %q, want it over an id range", counts)
	}
}

// TestCountBeforeAnAction: before an action over every row of a state in a queue, the count is
// the queues' own (no statement), dated; over another filter it is counted, a window of ids
// after another, and where that takes longer than the page's budget it says it is a lower
// bound, and how far down it counted.
func TestCountBeforeAnAction(t *testing.T) {
	confirm := func(c *client, form url.Values) string {
		t.Helper()
		_, body := c.get("/rows?state=dead")
		form.Set("csrf", c.csrf(body))
		resp, body := c.do("POST", "/act", form, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /act %v: %s\n%s", form, resp.Status, body)
		}
		return body
	}
	t.Run("from the queues' counts", func(t *testing.T) {
		f := &fakeDB{answers: answers()}
		c := newClient(t, page(t, f, nil))
		c.get("/") // reads the queues' counts
		body := confirm(c, url.Values{"do": {"requeue"}, "scope": {"matching"}, "state": {"dead"}, "queue": {quotedQueue}})
		if !strings.Contains(body, `id="counted-at"`) || !regexp.MustCompile(`(?s)id="count">\s*1 row the filter matches`).MatchString(body) {
			t.Errorf("the confirmation of a requeue of a queue's dead rows:\n%s", body)
		}
		if got := f.statements("SELECT COUNT(*) FROM ("); len(got) != 0 {
			t.Errorf("counted by %q, want the queues' counts", got)
		}
	})
	t.Run("a lower bound", func(t *testing.T) {
		slow := append([]answer{
			{key: "(SELECT MIN(", columns: []string{"lo", "hi"}, rows: [][]driver.Value{{int64(1), int64(1_000_000)}}},
			{key: "SELECT COUNT(*) FROM (", columns: []string{"n"}, rows: [][]driver.Value{{int64(7)}}, delay: 200 * time.Millisecond},
		}, answers()...)
		f := &fakeDB{answers: slow}
		c := newClient(t, page(t, f, nil))
		body := confirm(c, url.Values{"do": {"delete"}, "scope": {"matching"}, "state": {"dead"}, "older": {"1h"}})
		if !strings.Contains(body, `id="partial"`) || !strings.Contains(body, "At least 7 rows") || !strings.Contains(body, "980,001") {
			t.Errorf("a count that took longer than its budget: the confirmation does not say it is a lower bound, counted down to id 980,001:\n%s", body)
		}
		if got := f.statements("SELECT COUNT(*) FROM ("); len(got) != 1 {
			t.Errorf("%d counting statements after the budget ran out, want 1", len(got))
		}
	})
}

// TestListingFailureIsTheServers: a listing whose query fails answers 500 and shows the error; a
// filter that does not read answers 400 (TestFilterFieldsAreRead).
func TestListingFailureIsTheServers(t *testing.T) {
	var broken []answer
	for _, a := range answers() {
		if a.key != "SUBSTR(COALESCE(" {
			broken = append(broken, a)
		}
	}
	c := newClient(t, page(t, &fakeDB{answers: broken}, nil))
	if resp, body := c.get("/rows?state=dead"); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "no answer for") {
		t.Errorf("a listing whose query fails: %s, want 500 with the error shown:\n%s", resp.Status, body)
	}
}

// TestSchedulesPage: the schedules of the table's periodic jobs from its ticks table, a name
// with markup shown as text and the last job linked under the mount; a ticks table that cannot
// be read says so on the page, with what admin.Schedules says to do.
func TestSchedulesPage(t *testing.T) {
	tick := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	f := &fakeDB{answers: []answer{{key: "FROM `jobs_ticks`", columns: make([]string, 4), rows: [][]driver.Value{
		{script, tick.UnixMicro(), tick.Add(time.Minute).UnixMicro(), int64(7)},
		{"nightly", int64(0), int64(0), int64(0)},
	}}}}
	c := newClient(t, page(t, f, nil))
	resp, body := c.get("/schedules")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /schedules: %s\n%s", resp.Status, body)
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "2026-12-03 07:00:00Z", "2026-12-03 07:01:00Z", `href="/ops/inbox/rows/7"`, "nightly", "never", "none planned", `aria-current="page">Schedules`} {
		if !strings.Contains(body, want) {
			t.Errorf("the schedules page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("a schedule's name reached the page unescaped")
	}

	resp, body = newClient(t, page(t, &fakeDB{}, nil)).get("/schedules")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "its ticks table cannot be read") || !strings.Contains(body, "CREATE TABLE") {
		t.Errorf("GET /schedules without a ticks table: %s, want the page saying so with the statement that creates it:\n%s", resp.Status, body)
	}
}

// TestGroupsPage: the FIFO groups of a table with a group column, of the first queue the counts
// name unless another is asked, read by that queue's own statement (QueueGroups): a key and a
// queue holding markup shown as text, the head linked under the mount, a blocked group said so
// and kept alone by "blocked only"; a table without the column has neither the page nor its
// link.
func TestGroupsPage(t *testing.T) {
	grouped := jobs
	grouped.GroupKey = "group_key"
	later := time.Now().Add(time.Hour).UTC().Format("2006-01-02 15:04:05.000000")
	listed := answer{key: "inbox_head", columns: make([]string, 9), rows: [][]driver.Value{
		{quotedQueue, script, int64(3), int64(2), int64(0), nil, nil, nil, nil},
		{quotedQueue, "acme", int64(5), int64(4), int64(2), later, nil, nil, nil},
	}}
	f := &fakeDB{answers: append([]answer{listed}, answers()...)}
	c := newClient(t, pageOf(t, f, nil, grouped))
	resp, body := c.get("/groups")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /groups: %s\n%s", resp.Status, body)
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `Groups of <span class="queue">it&#39;s &#34;q&#34;</span>`, `href="/ops/inbox/rows/3"`, `href="/ops/inbox/rows/5"`, "blocked</span> until its head", `aria-current="page">Groups`} {
		if !strings.Contains(body, want) {
			t.Errorf("the groups page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("a group's key reached the page unescaped")
	}
	if !strings.Contains(body, `class="state due">free</span>`) {
		t.Errorf("a group no lease holds is not shown free:\n%s", body)
	}

	_, body = c.get("/groups?blocked=1&queue=" + url.QueryEscape(quotedQueue))
	if strings.Contains(body, `href="/ops/inbox/rows/3"`) || !strings.Contains(body, `href="/ops/inbox/rows/5"`) {
		t.Errorf("blocked only lists a free group, or not the blocked one:\n%s", body)
	}
	if got := f.statements("WHERE `queue` = ?"); len(got) != 2 || !strings.Contains(got[0], "inbox_head") {
		t.Errorf("the groups of a queue were read by %q, want a statement of that queue's groups for each page", got)
	}

	// Without a lease column the holds are the row lock or advisory form's locks: a group no
	// lease holds may be held all the same.
	locked := grouped
	locked.LockedUntil = ""
	f = &fakeDB{answers: append([]answer{listed}, answers()...)}
	_, body = newClient(t, pageOf(t, f, nil, locked)).get("/groups")
	if strings.Contains(body, `class="state due">free</span>`) || !strings.Contains(body, "free, or held by a lock") {
		t.Errorf("a table without a lease column shows a group free, where a lock may hold it:\n%s", body)
	}

	c = newClient(t, page(t, &fakeDB{answers: answers()}, nil))
	if resp, _ := c.get("/groups"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /groups of a table without a group column: %s, want 404", resp.Status)
	}
	if _, body := c.get("/"); strings.Contains(body, `/groups"`) {
		t.Errorf("a table without a group column links to the groups page")
	}
}

// TestLinksCarryTheirQuery: the links a page writes from a query (the states' tabs, the newest
// page, the way back from an action, a queue's tab of the groups) carry it as parameters, not
// escaped whole into one name.
func TestLinksCarryTheirQuery(t *testing.T) {
	grouped := jobs
	grouped.GroupKey = "group_key"
	none := answer{key: "inbox_head", columns: make([]string, 9)}
	f := &fakeDB{answers: append([]answer{none}, answers()...)}
	c := newClient(t, pageOf(t, f, nil, grouped))
	c.get("/") // reads the queues' counts
	_, rows := c.get("/rows?state=dead&queue=" + url.QueryEscape(quotedQueue))
	_, act := c.do("POST", "/act", url.Values{"csrf": {c.csrf(rows)}, "do": {"delete"}, "scope": {"selected"}, "id": {"3"}, "state": {"dead"}}, nil)
	_, groups := c.get("/groups")
	q := url.QueryEscape(quotedQueue)
	for _, want := range []struct{ page, body, link string }{
		{"rows", rows, `href="/ops/inbox/rows?queue=` + q + `&amp;state=delayed"`},
		{"rows", rows, `href="/ops/inbox/rows?queue=` + q + `&amp;state=dead">Newest`},
		{"act", act, `href="/ops/inbox/rows?state=dead">Back`},
		{"groups", groups, `href="/ops/inbox/groups?queue=` + q + `" aria-current="page"`},
	} {
		if !strings.Contains(want.body, strings.ReplaceAll(want.link, "+", "&#43;")) {
			t.Errorf("the %s page lacks the link %s:\n%s", want.page, want.link, want.body)
		}
	}
}
