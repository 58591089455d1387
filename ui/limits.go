package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
)

// limitsPage lists the table's concurrency limits (admin.Limits) and rate limits
// (admin.Rates), each where the description names its table, with the forms that set and
// clear them unless the page is read-only.
type limitsPage struct {
	view
	Limits []limitLine
	Rates  []rateLine
	Scopes []inbox.LimitScope // the scopes the table lets a limit or a rate count, for the forms
	Done   string             // what the last set or clear did, from the redirect's parameter
	Now    time.Time
}

// limitLine is a concurrency limit as the page shows it.
type limitLine struct {
	inbox.Limit
	Shown string // its queue as shown
}

// rateLine is a rate limit as the page shows it.
type rateLine struct {
	inbox.Rate
	Shown string // its queue as shown
}

func (h *handler) limits(w http.ResponseWriter, r *http.Request) {
	if !h.caps.Limits && !h.caps.Rates {
		h.fail(w, r, http.StatusNotFound, errors.New("this table has no limits: its description names neither a limits table (inbox.Table.Limits) nor a rates table (inbox.Table.Rates); create them with inbox schema -limits -rates -apply"))
		return
	}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	p := limitsPage{view: h.view(w, r, "limits"), Done: r.URL.Query().Get("done"), Now: time.Now(), Scopes: h.scopes()}
	if h.caps.Limits {
		list, err := h.a.Limits(ctx)
		if err != nil {
			h.fail(w, r, h.statusOf(err), err)
			return
		}
		for _, l := range list {
			p.Limits = append(p.Limits, limitLine{Limit: l, Shown: shownQueue(l.Queue)})
		}
	}
	if h.caps.Rates {
		list, err := h.a.Rates(ctx)
		if err != nil {
			h.fail(w, r, h.statusOf(err), err)
			return
		}
		for _, rt := range list {
			p.Rates = append(p.Rates, rateLine{Rate: rt, Shown: shownQueue(rt.Queue)})
		}
	}
	h.render(w, http.StatusOK, "limits", p)
}

// scopes are the scopes a limit or a rate of this table can count: a kind's and a limit key's
// need their columns.
func (h *handler) scopes() []inbox.LimitScope {
	s := []inbox.LimitScope{inbox.LimitPerQueue}
	if h.caps.Kinds {
		s = append(s, inbox.LimitPerKind)
	}
	if h.a.Table().LimitKey != "" {
		s = append(s, inbox.LimitPerKey)
	}
	return s
}

// setLimits sets or clears the concurrency limit or the rate the form names (do: set-limit,
// clear-limit, set-rate or clear-rate), and goes back to the limits page, which lists them as
// they are now and says what was done.
func (h *handler) setLimits(w http.ResponseWriter, r *http.Request) {
	if !h.posted(w, r, "set or clear the limit") {
		return
	}
	do := r.PostFormValue("do")
	run, done, err := h.limitAction(r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ActionTimeout)
	defer cancel()
	err = run(ctx)
	h.log.Info("inbox ui: "+do, "queue", r.PostFormValue("queue"), "scope", r.PostFormValue("scope"), "key", r.PostFormValue("key"), "err", err)
	if err != nil {
		h.fail(w, r, h.statusOf(err), err)
		return
	}
	http.Redirect(w, r, base(r)+"/limits?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// limitAction reads the form of a set or clear: what to run, and what the page then says it
// did. A form that names no action the table has, or a number or a window that does not
// parse, is refused before any statement runs.
func (h *handler) limitAction(form url.Values) (func(context.Context) error, string, error) {
	queue := strings.TrimSpace(form.Get("queue"))
	if queue == emptyQueue {
		queue = ""
	}
	// A limit key and a kind are compared byte for byte: taken as typed.
	key, shown := form.Get("key"), shownQueue(queue)
	scope := inbox.LimitScope(form.Get("scope"))
	switch do := form.Get("do"); {
	case do == "set-limit" && h.caps.Limits:
		n, err := strconv.Atoi(strings.TrimSpace(form.Get("max")))
		if err != nil {
			return nil, "", fmt.Errorf("max %q: the most rows in work at once, a whole number of 1 or more", form.Get("max"))
		}
		l := inbox.Limit{Queue: queue, Scope: scope, Key: key, Max: n}
		return func(ctx context.Context) error { return h.a.SetLimit(ctx, l) }, fmt.Sprintf("Limit set: at most %d rows of %s in work at once.", n, limitShown(shown, scope, key)), nil
	case do == "clear-limit" && h.caps.Limits:
		return func(ctx context.Context) error { return h.a.ClearLimit(ctx, queue, scope, key) }, fmt.Sprintf("Limit of %s cleared.", limitShown(shown, scope, key)), nil
	case do == "set-rate" && h.caps.Rates:
		n, err := strconv.Atoi(strings.TrimSpace(form.Get("starts")))
		if err != nil {
			return nil, "", fmt.Errorf("starts %q: the most rows claimed per interval, a whole number of 1 or more", form.Get("starts"))
		}
		per, err := time.ParseDuration(strings.TrimSpace(form.Get("per")))
		if err != nil {
			return nil, "", fmt.Errorf("per %q: the interval, a duration such as 1s, 1m or 1h", form.Get("per"))
		}
		rt := inbox.Rate{Queue: queue, Scope: scope, Key: key, Starts: n, Per: per}
		return func(ctx context.Context) error { return h.a.SetRate(ctx, rt) }, fmt.Sprintf("Rate set: at most %d starts of %s per %v.", n, limitShown(shown, scope, key), per), nil
	case do == "clear-rate" && h.caps.Rates:
		return func(ctx context.Context) error { return h.a.ClearRate(ctx, queue, scope, key) }, fmt.Sprintf("Rate of %s cleared.", limitShown(shown, scope, key)), nil
	default:
		return nil, "", fmt.Errorf("do=%q: set-limit or clear-limit where the table names a limits table, set-rate or clear-rate where it names a rates table", do)
	}
}

// limitShown names a limit's or a rate's rows in what the page says it did.
func limitShown(queue string, scope inbox.LimitScope, key string) string {
	if scope == inbox.LimitPerQueue || scope == "" {
		return "queue " + queue
	}
	return fmt.Sprintf("queue %s, %s %q", queue, scope, key)
}
