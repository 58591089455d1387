package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
)

// view is what every page shows: the heading, the navigation, the session's token for its
// forms, and an error where there is one.
type view struct {
	Base     string
	Table    string
	Title    string
	CSRF     string
	ReadOnly bool
	Caps     admin.Capabilities
	Nav      string // "overview", "rows", "groups", "limits" or "schedules": the navigation's current entry
	Error    string
	Shows    shows
}

// shows says which states the table tells apart, beside due rows: the overview's columns.
type shows struct{ Delayed, InWork, Retrying, Dead, Processed, Cancelled bool }

func showsOf(c admin.Capabilities) shows {
	return shows{
		Delayed: slices.Contains(c.States, admin.Delayed), InWork: slices.Contains(c.States, admin.InWork),
		Retrying: slices.Contains(c.States, admin.Retrying), Dead: slices.Contains(c.States, admin.Dead),
		Processed: slices.Contains(c.States, admin.Processed), Cancelled: slices.Contains(c.States, admin.Cancelled),
	}
}

func (h *handler) view(w http.ResponseWriter, r *http.Request, nav string) view {
	v := view{Base: base(r), Table: h.a.Table().Name, Title: h.cfg.Title, ReadOnly: h.cfg.ReadOnly, Caps: h.caps, Nav: nav, Shows: showsOf(h.caps)}
	if !h.cfg.ReadOnly {
		v.CSRF = csrfToken(w, r)
	}
	return v
}

// queryCtx is the context of one page's queries: the request's, ended after QueryTimeout.
func (h *handler) queryCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
}

// render writes page's template with data.
func (h *handler) render(w http.ResponseWriter, status int, page string, data any) {
	var b bytes.Buffer
	if err := h.pages[page].ExecuteTemplate(&b, page, data); err != nil {
		h.log.Error("inbox ui: rendering a page", "page", page, "err", err)
		http.Error(w, "the page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail shows err on a page of its own, with status; a query cut short by QueryTimeout says
// what to narrow.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
		msg = fmt.Sprintf("The query ran past the page's time (%v), and was stopped: narrow the filter (an id range, a queue, a state) or give the page more time (ui.Config.QueryTimeout, inbox ui -query-timeout). (%v)", h.cfg.QueryTimeout, err)
	}
	if status >= http.StatusInternalServerError {
		h.log.Error("inbox ui: "+r.Method+" "+r.URL.Path, "err", err)
	}
	v := h.view(w, r, "")
	v.Error = msg
	h.render(w, status, "error", v)
}

// queueLine is a queue of the overview: its counts, and its name as shown and as a link's
// value.
type queueLine struct {
	admin.Stats
	Shown string
}

type overviewPage struct {
	view
	Counts  countsRead
	Queues  []queueLine
	Total   *admin.Stats // the queues' counts summed, where there are several
	Refresh int          // seconds between the live refreshes of the counts
	Pausing bool         // each queue has a button that pauses or resumes it
}

// total sums the counts of several queues: an unknown count stays unknown; the oldest due row
// is the oldest of them all.
func total(stats []admin.Stats) *admin.Stats {
	if len(stats) < 2 {
		return nil
	}
	var sum admin.Stats
	add := func(to *int64, n int64) {
		if *to == admin.Unknown || n == admin.Unknown {
			*to = admin.Unknown
			return
		}
		*to += n
	}
	for _, s := range stats {
		sum.Due += s.Due
		sum.Delayed += s.Delayed
		add(&sum.InWork, s.InWork)
		add(&sum.Retrying, s.Retrying)
		sum.Dead += s.Dead
		sum.Processed += s.Processed
		sum.Cancelled += s.Cancelled
		if sum.OldestDue != admin.Unknown && (s.OldestDue == admin.Unknown || s.OldestDue > sum.OldestDue) {
			sum.OldestDue = s.OldestDue
		}
	}
	return &sum
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	p := overviewPage{view: h.view(w, r, "overview"), Counts: h.counts.read(ctx), Refresh: max(int(h.cfg.CountEvery/time.Second), 2)}
	p.Pausing = h.caps.Pauses && !h.cfg.ReadOnly
	for _, s := range p.Counts.Stats {
		p.Queues = append(p.Queues, queueLine{Stats: s, Shown: shownQueue(s.Queue)})
	}
	p.Total = total(p.Counts.Stats)
	page := "overview"
	if r.URL.Query().Get("part") == "queues" {
		page = "queues" // the live refresh's fragment
	}
	h.render(w, http.StatusOK, page, p)
}

// emptyQueue is how a link and the filter's form name the queue whose name is empty, as the
// inbox command prints it.
const emptyQueue = `""`

func shownQueue(name string) string {
	if name == "" {
		return emptyQueue
	}
	return name
}

// filterForm is the filter's form as typed, each field as its query parameter names it.
type filterForm struct {
	State, Queue, Kind, From, To, Older, Error, Path, Value string
}

var filterParams = []string{"state", "queue", "kind", "from", "to", "older", "error", "path", "value"}

func (ff *filterForm) fields() []*string {
	return []*string{&ff.State, &ff.Queue, &ff.Kind, &ff.From, &ff.To, &ff.Older, &ff.Error, &ff.Path, &ff.Value}
}

func readForm(v url.Values) filterForm {
	var ff filterForm
	for i, f := range ff.fields() {
		*f = strings.TrimSpace(v.Get(filterParams[i]))
	}
	if ff.State == "" {
		ff.State = admin.Due.String()
	}
	return ff
}

// values are the form's non-empty fields, as query parameters.
func (ff filterForm) values() url.Values {
	v := url.Values{}
	for i, f := range ff.fields() {
		if *f != "" {
			v.Set(filterParams[i], *f)
		}
	}
	return v
}

// Fields are the form's non-empty fields, for the hidden fields of an action's form.
func (ff filterForm) Fields() url.Values { return ff.values() }

// Query is the form as a query string, for a link (see queryOf).
func (ff filterForm) Query() template.URL { return queryOf(ff.values()) }

// queryOf is v encoded as a query string, typed for html/template as a URL's part that needs no
// escaping: written after a link's "?", a string would be escaped whole, its "=" and "&" with it.
func queryOf(v url.Values) template.URL {
	return template.URL(v.Encode()) // Encode escapes every key and value
}

// filter reads the form, refusing a field that does not read, with what to write instead.
func (ff filterForm) filter() (admin.Filter, error) {
	var f admin.Filter
	var err error
	if f.State, err = admin.ParseState(ff.State); err != nil {
		return f, err
	}
	switch ff.Queue {
	case "":
	case emptyQueue:
		f.Queues = []string{""}
	default:
		f.Queues = []string{ff.Queue}
	}
	if ff.Kind != "" {
		f.Kinds = []string{ff.Kind}
	}
	for _, id := range []struct {
		text, name string
		to         *int64
	}{{ff.From, "from", &f.FromID}, {ff.To, "to", &f.ToID}} {
		if id.text == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(id.text, ",", ""), 10, 64)
		if err != nil || n <= 0 {
			return f, fmt.Errorf("id %s %q: write an id, a whole number above 0", id.name, id.text)
		}
		*id.to = n
	}
	if ff.Older != "" {
		if f.OlderThan, err = parseAge(ff.Older); err != nil {
			return f, err
		}
	}
	f.ErrorContains, f.Path, f.Value = ff.Error, ff.Path, ff.Value
	if f.Path == "" && f.Value != "" {
		return f, errors.New("a payload value without a path: write the path to compare it at (customer.id)")
	}
	return f, nil
}

// parseAge reads an age as Go writes a duration (90s, 15m, 2h30m), or in days (7d).
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("age %q: write it as 90s, 15m, 2h30m or 7d", s)
	}
	return d, nil
}

// stateTab is a state the rows page lists, as a link.
type stateTab struct {
	State   admin.State
	Query   template.URL
	Current bool
}

// actionButton is an action a page offers, on its selection or on every row its filter
// matches.
type actionButton struct {
	Action admin.Action
	Label  string
}

type rowsPage struct {
	view
	Form     filterForm
	Filter   admin.Filter
	Rows     []admin.Row
	Now      time.Time
	From, To int64        // the ids the page read
	Full     bool         // the page holds pageRows rows
	Next     template.URL // the query of the next page; empty at the end
	States   []stateTab
	Queues   []string
	Kinds    []string // the kinds the last count saw, for the kind field's suggestions
	Actions  []actionButton
	Ages     bool // the age field applies to the listed state
}

func (h *handler) rows(w http.ResponseWriter, r *http.Request) {
	ff := readForm(r.URL.Query())
	p := rowsPage{view: h.view(w, r, "rows"), Form: ff, Now: time.Now()}
	p.States = h.stateTabs(ff)
	for _, q := range h.counts.lastStats() {
		p.Queues = append(p.Queues, shownQueue(q.Queue))
		for _, k := range q.Kinds {
			if !slices.Contains(p.Kinds, k.Kind) {
				p.Kinds = append(p.Kinds, k.Kind)
			}
		}
	}
	f, err := ff.filter()
	status := http.StatusBadRequest // a filter that does not read, or that the table cannot take
	if err == nil {
		err = h.listInto(r, &p, f)
		status = h.statusOf(err)
	}
	if err != nil {
		p.Error = h.errorText(err)
	}
	if status >= http.StatusInternalServerError {
		h.log.Error("inbox ui: listing rows", "err", err)
	}
	h.render(w, status, "rows", p)
}

// statusOf is the status of a page whose queries ended with err: 504 when QueryTimeout cut them
// short, 400 for a filter the table cannot take (it lacks a role: inbox.ErrSchema), 500 for
// another error.
func (h *handler) statusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, inbox.ErrSchema):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// errorText is what a page says of err: a query cut short by QueryTimeout says what to narrow.
func (h *handler) errorText(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("The query ran past the page's time (%v), and was stopped: narrow the filter (an id range, a queue, a state) or give the page more time (ui.Config.QueryTimeout, inbox ui -query-timeout).", h.cfg.QueryTimeout)
	}
	return err.Error()
}

// listInto lists a page of the rows f matches into p: at most pageRows rows, from at most
// span(f) ids below the page's start (the before parameter, or the filter's highest id, or
// the table's), and the query of the next page: after a full page, the ids below its last
// row; after a page that read its span without filling up, the ids below the span.
func (h *handler) listInto(r *http.Request, p *rowsPage, f admin.Filter) error {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	p.Filter = f
	p.Ages = slices.Contains(h.caps.Ages, f.State)
	for _, act := range h.caps.Actions {
		if act.Takes(f.State) && !h.cfg.ReadOnly {
			p.Actions = append(p.Actions, actionButton{Action: act, Label: actionLabel(act)})
		}
	}
	lowest, top, highest, err := h.ids(ctx, f)
	if err != nil {
		return err
	}
	bottom := max(lowest, f.FromID)
	if before, err := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64); err == nil && before > 0 {
		top = min(top, before-1)
	}
	if top < bottom || highest == 0 {
		return nil
	}
	window := f
	window.FromID, window.ToID = max(bottom, top-span(f)+1), top
	p.From, p.To = window.FromID, window.ToID
	rows, err := h.a.Rows(ctx, window, pageRows)
	if err != nil {
		return err
	}
	p.Rows = rows
	next := int64(0)
	switch {
	case len(rows) == pageRows:
		p.Full, next = true, rows[len(rows)-1].ID
	case window.FromID > bottom:
		next = window.FromID
	}
	if next > 0 {
		v := p.Form.values()
		v.Set("before", strconv.FormatInt(next, 10))
		p.Next = queryOf(v)
	}
	return nil
}

func (h *handler) stateTabs(ff filterForm) []stateTab {
	var tabs []stateTab
	for _, s := range append(slices.Clone(h.caps.States), admin.AnyState) {
		v := url.Values{"state": {s.String()}}
		if ff.Queue != "" {
			v.Set("queue", ff.Queue)
		}
		tabs = append(tabs, stateTab{State: s, Query: queryOf(v), Current: s.String() == ff.State})
	}
	return tabs
}

func actionLabel(act admin.Action) string {
	s := act.String()
	return strings.ToUpper(s[:1]) + s[1:]
}

type rowPage struct {
	view
	Row     admin.Row
	Now     time.Time
	Payload shown
	Headers shown
	Columns []column
	Actions []actionButton
	// Cancel offers to cancel the row (it has not settled), Uncancel to requeue it (it was
	// cancelled); Done is what the last of them did, as cancelDone names it.
	Cancel, Uncancel bool
	Done             string
}

// column is one of the application's own columns of a row, for the row's page.
type column struct {
	Name  string
	Value string
}

func (h *handler) row(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no row %q: a row's page is rows/ and its id", r.PathValue("id")))
		return
	}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	row, err := h.a.Row(ctx, id)
	switch {
	case errors.Is(err, admin.ErrNoRow):
		h.fail(w, r, http.StatusNotFound, err)
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	p := rowPage{view: h.view(w, r, "rows"), Row: row, Now: time.Now(), Payload: showPayload(row.Payload), Headers: showPayload([]byte(row.Headers))}
	for _, c := range slices.Sorted(mapKeys(row.Columns)) {
		p.Columns = append(p.Columns, column{Name: c, Value: showValue(row.Columns[c])})
	}
	for _, act := range h.caps.Actions {
		// A row's page cancels it with a button of its own, which says what was done (cancel).
		if act.Takes(row.State) && act != admin.Cancel && row.State != admin.AnyState && !h.cfg.ReadOnly {
			p.Actions = append(p.Actions, actionButton{Action: act, Label: actionLabel(act)})
		}
	}
	if h.caps.Cancels && !h.cfg.ReadOnly {
		p.Cancel = slices.Contains([]admin.State{admin.Due, admin.Delayed, admin.InWork}, row.State)
		p.Uncancel = row.State == admin.Cancelled
	}
	p.Done = cancelDone[r.URL.Query().Get("done")]
	h.render(w, http.StatusOK, "row", p)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// actPage is the confirmation before an action, and its result after.
type actPage struct {
	view
	Action admin.Action
	Label  string
	Scope  string // "selected" or "matching"
	IDs    []int64
	Form   filterForm
	Filter admin.Filter
	Count  int64
	Capped bool // Count reached countCap: that many or more
	// Counted is how far down the count went where it stopped before the lowest id (the ids
	// from CountedFrom up): then Count is a lower bound.
	CountedFrom int64
	// CountedAt dates a count taken from the queues' counts (the last admin.Stats).
	CountedAt time.Time
	Result    admin.Result
	Done      bool         // the action ran
	Cut       string       // why the action stopped before its end, where it did
	Back      template.URL // the listing's query to go back to
	// Bounded says the filter's ids were bounded to those a listing reads (see bound).
	Bounded bool
}

func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	if !h.posted(w, r, "run the action") {
		return
	}
	p, sel, err := h.readAct(w, r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if p.Scope == "matching" && unindexed(p.Filter) && p.Filter.FromID == 0 {
		if err := h.bound(r, &p); err != nil {
			h.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		sel = admin.Matching(p.Filter)
	}
	if r.PostFormValue("confirm") != "yes" {
		if err := h.count(r, &p, sel); err != nil {
			p.Error = h.errorText(err) + " The action was not run: without its count, it is not offered."
		}
		h.render(w, http.StatusOK, "act", p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ActionTimeout)
	defer cancel()
	p.Result, err = h.a.Act(ctx, p.Action, sel)
	p.Done = true
	h.log.Info("inbox ui: action", "action", p.Action.String(), "rows", sel.String(), "changed", p.Result.Changed, "in_work", p.Result.InWork, "skipped", p.Result.Skipped, "err", err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		p.Cut = fmt.Sprintf("The action ran past its time (%v) and stopped: the rows it changed before stay changed, the others are as they were. Run it again for the rest, or give it more time (ui.Config.ActionTimeout, inbox ui -action-timeout).", h.cfg.ActionTimeout)
	case err != nil:
		p.Error = err.Error()
	}
	h.render(w, http.StatusOK, "act", p)
}

// unindexed reports whether f has a condition no index serves, which reads every row of its
// id range: on the last error, or on the payload.
func unindexed(f admin.Filter) bool { return f.ErrorContains != "" || f.Path != "" }

// span is how many ids a listing of f reads at most.
func span(f admin.Filter) int64 {
	if f.Path != "" {
		return jsonSpan
	}
	return scanSpan
}

// ids returns the table's lowest and highest ids, and top, the highest a reading of f takes:
// the table's, or f's highest id where it is lower.
func (h *handler) ids(ctx context.Context, f admin.Filter) (lowest, top, highest int64, err error) {
	lowest, highest, err = h.a.Bounds(ctx)
	top = highest
	if f.ToID != 0 {
		top = min(top, f.ToID)
	}
	return lowest, top, highest, err
}

// bound gives the filter of an action over every match, where it has a condition no index
// serves and no lowest id, the ids a listing reads: the span(f) highest below its highest id,
// or the table's. The form then carries them, and the confirmation and the action take the same
// ids. A wider range is the operator's to give (from, to).
func (h *handler) bound(r *http.Request, p *actPage) error {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	lowest, top, _, err := h.ids(ctx, p.Filter)
	if err != nil {
		return err
	}
	p.Filter.FromID = max(lowest, top-span(p.Filter)+1, 1)
	p.Filter.ToID = max(top, p.Filter.FromID)
	p.Form.From, p.Form.To = strconv.FormatInt(p.Filter.FromID, 10), strconv.FormatInt(p.Filter.ToID, 10)
	p.Bounded = true
	return nil
}

// readAct reads an action's form: the action, and the rows it names, its selection or every
// row its filter matches.
func (h *handler) readAct(w http.ResponseWriter, r *http.Request) (actPage, admin.Selection, error) {
	p := actPage{view: h.view(w, r, "rows"), Form: readForm(r.PostForm), Scope: r.PostFormValue("scope")}
	var err error
	if p.Action, err = admin.ParseAction(r.PostFormValue("do")); err != nil {
		return p, admin.Selection{}, err
	}
	if !slices.Contains(h.caps.Actions, p.Action) {
		return p, admin.Selection{}, fmt.Errorf("table %q cannot %s: it lacks the column the action needs", p.Table, p.Action)
	}
	p.Label = actionLabel(p.Action)
	if p.Filter, err = p.Form.filter(); err != nil {
		return p, admin.Selection{}, err
	}
	back := p.Form.values()
	back.Del("before")
	p.Back = queryOf(back)
	switch p.Scope {
	case "selected":
		for _, s := range r.PostForm["id"] {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return p, admin.Selection{}, fmt.Errorf("id %q: not an id", s)
			}
			p.IDs = append(p.IDs, id)
		}
		if len(p.IDs) == 0 {
			return p, admin.Selection{}, errors.New("no row selected: tick the rows to act on, or act on every row the filter matches")
		}
		return p, admin.IDs(p.IDs...), nil
	case "matching":
		return p, admin.Matching(p.Filter), nil
	}
	return p, admin.Selection{}, fmt.Errorf("scope %q: act on the selected rows or on every row the filter matches", p.Scope)
}
