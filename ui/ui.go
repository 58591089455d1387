// Package ui is the operator's web page of an inbox table: its queues with their rows counted by
// state and the age of the oldest due row, refreshed live; its rows listed by state and queue,
// filtered by id range, age, last error and a JSON path into the payload; a row's detail; its
// FIFO groups with rows pending (head, backlog, holder, blocked); its concurrency and rate
// limits, set and cleared from the page; and the actions package admin
// runs (requeue, retry now, cancel, delete) on one row, a selection, or every row a filter
// matches, with the count of the rows shown before the action runs.
//
// New returns an http.Handler built on an *admin.Admin, with the standard library only and
// every asset embedded (no CDN). Mount it under a path of your server, behind your own
// authentication:
//
//	page, err := ui.New(a, &ui.Config{Title: "billing"})
//	if err != nil { … }
//	mux.Handle("/ops/inbox/", http.StripPrefix("/ops/inbox", requireStaff(page)))
//
// The command `inbox ui` serves it for one table on its own.
//
// Safe by default: every action is a POST that carries a token of the browser's session,
// which a page of another site cannot read (a cookie and a form field, compared), and that
// the browser does not say comes from another site (Sec-Fetch-Site, Origin); every name, payload and error is escaped by html/template;
// the page's scripts and styles come from the handler alone (a Content-Security-Policy says
// so); each page's queries run under QueryTimeout, so a slow one cannot pile up; ReadOnly
// shows no action and refuses every POST. GET /healthz pings the database (for load
// balancers), without the authentication Token or User ask.
package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Config configures the page; nil means every default.
type Config struct {
	// Title names what the page operates, after the table's name in its heading (the database,
	// say, shown without its password).
	Title string
	// ReadOnly shows no action, and refuses every POST.
	ReadOnly bool
	// Token, when set, is asked of every request but the health check: as the bearer of an
	// Authorization header, or in the cookie that visiting a page with ?token=… sets.
	Token string
	// User and Password, when User is set, are asked of every request but the health check,
	// by HTTP basic authentication. With Token set too, either one lets a request in.
	User, Password string
	// QueryTimeout bounds the queries of one page (DefaultQueryTimeout when 0).
	QueryTimeout time.Duration
	// ActionTimeout bounds an action, which changes its rows a chunk at a time (each chunk
	// committed alone, so one cut short leaves the rest as they were), and the count behind
	// the overview, which reads the whole table (DefaultActionTimeout when 0).
	ActionTimeout time.Duration
	// CountEvery is how often the overview's counts are read again while a page asks for them
	// (DefaultCountEvery when 0): they come from one statement that reads the whole table
	// (admin.Stats), run in the background, so that no page waits for it.
	CountEvery time.Duration
	// Logger receives each action run, with its result, and the errors pages show (nil:
	// discarded).
	Logger *slog.Logger
}

// The defaults of Config.
const (
	DefaultQueryTimeout  = 5 * time.Second
	DefaultActionTimeout = time.Minute
	DefaultCountEvery    = 10 * time.Second
)

// Bounds of what one page reads.
const (
	// pageRows is how many rows a listing shows.
	pageRows = 50
	// scanSpan is how many ids one listing page reads at most: a state whose rows are few, or
	// a filter on the last error, reads this much of the primary key and no more, and the page
	// offers to read on from where it stopped. A filter on the payload, which parses each row's
	// JSON, reads jsonSpan.
	scanSpan = 20_000
	jsonSpan = 10_000
	// countCap is where the count before an action stops: "10,000 or more".
	countCap = 10_000
	// countBudget is how long the count before an action goes on reading windows of ids, the
	// first of scanSpan ids, each next one of twice as many: a count that has not read every id by
	// then says it is a lower bound, and down to which id it counted. A window is not begun
	// that would end past the budget, were it to take twice as long as the last.
	countBudget = 150 * time.Millisecond
)

//go:embed templates static
var assets embed.FS

// handler serves the page for one table.
type handler struct {
	a      *admin.Admin
	cfg    Config
	caps   admin.Capabilities
	pages  map[string]*template.Template
	counts *counts
	mux    *http.ServeMux
	log    *slog.Logger
}

// New returns the page of the table a operates. It fails when a Config value is out of range.
func New(a *admin.Admin, cfg *Config) (http.Handler, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"QueryTimeout", &c.QueryTimeout, DefaultQueryTimeout}, {"ActionTimeout", &c.ActionTimeout, DefaultActionTimeout}, {"CountEvery", &c.CountEvery, DefaultCountEvery}} {
		if *d.v < 0 {
			return nil, sentinel.Errorf(nil, "", "ui.Config.%s is %v: give 0 (the default, %v) or more", d.name, *d.v, d.def)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.User == "" && c.Password != "" {
		return nil, errors.New("inbox: ui.Config.Password is set without a User: set both for basic authentication")
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h := &handler{a: a, cfg: c, caps: a.Capabilities(), pages: pages, log: log}
	h.counts = &counts{stats: a.Stats, every: c.CountEvery, timeout: c.ActionTimeout}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /rows", h.rows)
	mux.HandleFunc("GET /rows/{id}", h.row)
	mux.HandleFunc("GET /schedules", h.schedules)
	mux.HandleFunc("GET /groups", h.groups)
	mux.HandleFunc("GET /limits", h.limits)
	mux.HandleFunc("POST /limits", h.setLimits)
	mux.HandleFunc("POST /act", h.act)
	mux.HandleFunc("POST /pause", h.pause)
	mux.HandleFunc("POST /cancel", h.cancel)
	mux.Handle("GET /static/", http.StripPrefix("/static", http.FileServerFS(static)))
	h.mux = mux
	return secured(rooted(h.authenticated(h))), nil
}

// rooted gives the handlers a path that starts with a slash, whether the mount's prefix was
// stripped with its final slash or without; the mount's own path, without its slash, goes to
// its page.
func rooted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "":
			http.Redirect(w, r, base(r)+"/", http.StatusFound)
			return
		case !strings.HasPrefix(r.URL.Path, "/"):
			r = withPath(r, "/"+r.URL.Path)
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the page's paths, the mount's prefix stripped.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		h.health(w, r)
		return
	}
	if r.Method == http.MethodPost {
		switch {
		case h.cfg.ReadOnly:
			h.fail(w, r, http.StatusForbidden, errors.New("this page is read-only: it runs no action"))
			return
		case crossOrigin(r):
			h.fail(w, r, http.StatusForbidden, errors.New("refused: the form was sent from another site"))
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// withPath is r with its URL's path set to path.
func withPath(r *http.Request, path string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = path, ""
	r2.URL = &u
	return r2
}

// base is the path the handler is mounted at, without its final slash: the request's path as
// the client sent it, less the path the handler sees (http.StripPrefix strips the prefix from
// the URL, not from RequestURI). Links are written under it, so that the page works under any
// prefix.
func base(r *http.Request) string {
	sent, err := url.ParseRequestURI(r.RequestURI)
	if err != nil || r.RequestURI == "" {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSuffix(sent.Path, r.URL.Path), "/")
}

// health answers 200 when the database answers a ping within QueryTimeout, 503 otherwise. The
// error is logged, not shown: a load balancer needs no more.
func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := h.a.Ping(ctx); err != nil {
		h.log.Error("inbox ui: health check", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "database unavailable\n")
		return
	}
	io.WriteString(w, "ok\n")
}

// secured sets the headers every response carries: the page's own scripts and styles only, no
// framing, no caching, no sniffing.
func secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// tokenCookie carries Config.Token once a page was visited with ?token=….
const tokenCookie = "inbox_token"

// authenticated asks every request but the health check for Config.Token or Config.User's
// credentials, where they are set.
func (h *handler) authenticated(next http.Handler) http.Handler {
	if h.cfg.Token == "" && h.cfg.User == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if h.cfg.Token != "" {
			if given := r.URL.Query().Get("token"); given != "" && same(given, h.cfg.Token) {
				// Keep the token in a cookie and out of the address bar, history and logs.
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: given, Path: base(r) + "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
				q := r.URL.Query()
				q.Del("token")
				target := base(r) + r.URL.Path
				if len(q) > 0 {
					target += "?" + q.Encode()
				}
				http.Redirect(w, r, target, http.StatusSeeOther)
				return
			}
			bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if ok && same(bearer, h.cfg.Token) {
				next.ServeHTTP(w, r)
				return
			}
			if c, err := r.Cookie(tokenCookie); err == nil && same(c.Value, h.cfg.Token) {
				next.ServeHTTP(w, r)
				return
			}
		}
		if h.cfg.User != "" {
			user, password, ok := r.BasicAuth()
			if ok && same(user, h.cfg.User) && same(password, h.cfg.Password) {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="inbox", charset="UTF-8"`)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		if h.cfg.Token != "" {
			io.WriteString(w, "unauthorized: open the page with ?token=… (the token it was started with), or send Authorization: Bearer …\n")
		} else {
			io.WriteString(w, "unauthorized\n")
		}
	})
}

// crossOrigin reports whether the browser says a request comes from a page of another origin:
// by Sec-Fetch-Site, or, from a browser that does not send it, by an Origin header whose host
// is not the request's. A request that says neither (not from a browser) is not refused here:
// the session's token (csrfValid) is asked of every action either way.
func crossOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}

// same compares a secret given with the one expected, in a time that does not tell how much of
// it matched.
func same(given, want string) bool {
	return subtle.ConstantTimeCompare([]byte(given), []byte(want)) == 1
}
