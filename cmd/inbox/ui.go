package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/ui"
)

const uiHead = `Serves the operator's web page for one table (package ui): its queues with their rows counted
by state and the oldest due row's age, refreshed live; its rows by state and queue, filtered by
id range, age, last error and a JSON path into the payload; a row's detail; and requeue, retry
now and delete, on a row, a selection or every row a filter matches, each shown with its count
before it runs. GET /healthz pings the database.

It listens on loopback unless -addr says otherwise; an address beyond loopback needs -token (or
$INBOX_UI_TOKEN: open the page once with ?token=…) or -user with $INBOX_UI_PASSWORD (basic
authentication). Serve it over TLS from a proxy beyond a trusted network.`

func uiCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("ui", uiHead)
	dsn := dsnFlag(fs, "none")
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on (host:port; port 0 picks a free one)")
	token := fs.String("token", "", "the token every request must carry (default $INBOX_UI_TOKEN)")
	user := fs.String("user", "", "the user of basic authentication, whose password is $INBOX_UI_PASSWORD")
	readOnly := fs.Bool("read-only", false, "show no action, and refuse them")
	queryTimeout := fs.Duration("query-timeout", ui.DefaultQueryTimeout, "the most one page's queries may take")
	actionTimeout := fs.Duration("action-timeout", ui.DefaultActionTimeout, "the most an action (and the count behind the queues' table) may take")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *token == "" {
		*token = s.getenv("INBOX_UI_TOKEN")
	}
	password := s.getenv("INBOX_UI_PASSWORD")
	s.stdout.hide(*token, password)
	s.stderr.hide(*token, password)
	switch {
	case *user != "" && password == "":
		return usagef("-user %q needs its password in $INBOX_UI_PASSWORD", *user)
	case *token == "" && *user == "" && !loopback(*addr):
		return usagef("-addr %s listens beyond loopback: give -token (or $INBOX_UI_TOKEN), or -user and $INBOX_UI_PASSWORD", *addr)
	}
	t, ok, err := s.target(*dsn)
	if err != nil {
		return err
	}
	if !ok {
		return usagef("no database: give -dsn, or set $INBOX_DSN")
	}
	if _, err := admin.Schema(t.dialect, tf.table()); err != nil {
		return usagef("%v", err)
	}
	// The pages, the count behind the queues' table and an action may each hold a connection.
	// A read-only page opens a SQLite file read-only; either way it never creates one.
	access := writeFile
	if *readOnly {
		access = readFile
	}
	db, err := open(ctx, t, 4, access)
	if err != nil {
		return err
	}
	defer db.Close()
	tbl, err := tf.inferred(ctx, db, t.dialect)
	if err != nil {
		return err
	}
	if tbl, err = withLimits(ctx, db, t.dialect, tbl); err != nil {
		return err
	}
	a, err := admin.New(db, t.dialect, tbl)
	if err != nil {
		return err
	}
	page, err := ui.New(a, &ui.Config{
		Title: t.shown, ReadOnly: *readOnly, Token: *token, User: *user, Password: password,
		QueryTimeout: *queryTimeout, ActionTimeout: *actionTimeout,
		Logger: slog.New(slog.NewTextHandler(s.stderr, nil)),
	})
	if err != nil {
		return usagef("%v", err)
	}
	return serveUI(ctx, s, page, *addr, *token != "", fmt.Sprintf("table %s of %s", tbl.Name, t.shown))
}

// serveUI serves page on addr until ctx is done, then shuts down, giving requests in flight 5
// seconds.
func serveUI(ctx context.Context, s *session, page http.Handler, addr string, token bool, what string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: page, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(s.stdout, "inbox ui: %s at http://%s/\n", what, ln.Addr())
	if token {
		fmt.Fprintln(s.stdout, "inbox ui: open it once with ?token=… (the token it was given); the page keeps it in a cookie")
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// loopback reports whether addr listens on loopback only: localhost, or a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
