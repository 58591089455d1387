package ui_test

import (
	"database/sql/driver"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/ui"
)

// TestLimitsPage: a table that names a limits and a rates table has a Limits page listing
// both, escaped, with forms that set and clear them through admin; a read-only page shows no
// form, and a table that names neither has no such page.
func TestLimitsPage(t *testing.T) {
	limited := jobs
	limited.Kind, limited.LimitKey = "kind", "limit_key"
	limited.Limits, limited.Rates = inbox.LimitsTable, inbox.RatesTable
	limits := answer{key: "FROM `inbox_limits` inbox_limit", columns: make([]string, 5), rows: [][]driver.Value{
		{quotedQueue, "key", script, int64(3), int64(2)},
		{"", "queue", "", int64(7), int64(0)},
	}}
	rates := answer{key: "FROM `inbox_rates` inbox_rate", columns: make([]string, 6), rows: [][]driver.Value{
		{quotedQueue, "kind", script, int64(100), int64(60_000_000), int64(42)},
		{"q", "key", "tenant-7", int64(5), int64(1_000_000), int64(1)},
	}}
	// The probe before SetLimit's and ClearLimit's removal of stale slots (sqltext.Limits.AnySlot):
	// the table has no slot rows.
	stale := answer{key: "SELECT slot FROM inbox_slots", columns: make([]string, 1)}
	f := &fakeDB{answers: append([]answer{stale, limits, rates, {key: "inbox_limits"}}, answers()...)}
	c := newClient(t, pageOf(t, f, nil, limited))
	resp, body := c.get("/limits")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /limits: %s\n%s", resp.Status, body)
	}
	for _, want := range []string{
		`aria-current="page">Limits`, `<td class="queue">it&#39;s &#34;q&#34;</td>`, `<td class="key">&lt;script&gt;alert(1)&lt;/script&gt;</td>`,
		`<td class="num">3</td>`, `<td class="num">2</td>`, `<td class="queue">&#34;&#34;</td>`,
		`<td>kind</td>`, `<td class="key">tenant-7</td>`, `<td>1m0s</td>`, `<td class="num">42</td>`,
		`<input type="hidden" name="scope" value="key"><input type="hidden" name="key" value="tenant-7">`,
		`<option value="queue">`, `<option value="kind">`, `<option value="key">`, `id="set-limit"`, `id="set-rate"`,
		`value="clear-limit"`, `value="clear-rate"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the limits page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("a limit's key or a rate's kind reached the page unescaped")
	}

	form := url.Values{"do": {"set-limit"}, "queue": {quotedQueue}, "scope": {"key"}, "key": {"acme"}, "max": {"4"}}
	if resp, _ := c.do("POST", "/limits", form, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /limits without the session's token: %s, want 403", resp.Status)
	}
	if got := f.statements("INSERT INTO `inbox_limits`"); len(got) != 0 {
		t.Fatalf("a limit was set without the session's token: %q", got)
	}
	form.Set("csrf", c.csrf(body))
	resp, _ = c.do("POST", "/limits", form, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ops/inbox/limits?done=") {
		t.Fatalf("POST /limits set-limit: %s to %q, want 303 to the limits page", resp.Status, resp.Header.Get("Location"))
	}
	if got := f.statements("INSERT INTO `inbox_limits`"); len(got) != 1 {
		t.Errorf("set-limit ran %q, want one INSERT into the limits table", got)
	}
	_, body = c.get(strings.TrimPrefix(resp.Header.Get("Location"), "/ops/inbox"))
	if want := `id="done">Limit set: at most 4 rows of queue it&#39;s &#34;q&#34;, key &#34;acme&#34; in work at once.`; !strings.Contains(body, want) {
		t.Errorf("the page after set-limit lacks %q:\n%s", want, body)
	}
	for _, bad := range []url.Values{
		{"do": {"set-limit"}, "queue": {"q"}, "scope": {"queue"}, "max": {"many"}},
		{"do": {"set-rate"}, "queue": {"q"}, "starts": {"5"}, "per": {"a while"}},
		{"do": {"drop"}},
	} {
		bad.Set("csrf", c.csrf(body))
		if resp, page := c.do("POST", "/limits", bad, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `class="error"`) {
			t.Errorf("POST /limits %v: %s, want 400 saying why", bad, resp.Status)
		}
	}

	c = newClient(t, pageOf(t, &fakeDB{answers: append([]answer{limits, rates}, answers()...)}, &ui.Config{ReadOnly: true}, limited))
	if _, body := c.get("/limits"); strings.Contains(body, "<form class=\"clear\"") || strings.Contains(body, `id="set-limit"`) || strings.Contains(body, `id="set-rate"`) || !strings.Contains(body, `<td class="num">42</td>`) {
		t.Errorf("the read-only limits page shows a form, or not the rates:\n%s", body)
	}

	c = newClient(t, page(t, &fakeDB{answers: answers()}, nil))
	if resp, _ := c.get("/limits"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /limits of a table without limits or rates: %s, want 404", resp.Status)
	}
	if _, body := c.get("/"); strings.Contains(body, `/limits"`) {
		t.Errorf("a table without limits or rates links to the limits page")
	}
}
