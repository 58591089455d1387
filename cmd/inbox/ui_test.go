package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/inboxtest"
)

func TestCommandUIRefusesToListenBeyondLoopbackUnasked(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "ui.db")
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"-addr", "0.0.0.0:0"}, nil, "listens beyond loopback: give -token"},
		{[]string{"-addr", "192.0.2.1:8080"}, nil, "listens beyond loopback"},
		{[]string{"-addr", "[::]:0"}, nil, "listens beyond loopback"},
		{[]string{"-user", "ops"}, nil, "needs its password in $INBOX_UI_PASSWORD"},
	} {
		code, stdout, stderr := runCommand(t, c.env, append([]string{"ui", "-dsn", dsn}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("inbox ui %v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestCommandUIServesThePageWithoutThePassword serves the page of a Postgres table through a
// DSN with a password (the test server trusts local logins, so any password connects): no
// page, header or line of output shows it; the page asks for its token, and the health check
// does not.
func TestCommandUIServesThePageWithoutThePassword(t *testing.T) {
	var pg string
	for _, l := range liveDSNs(t) {
		if l.name == "postgres" {
			pg = l.dsn
		}
	}
	if pg == "" {
		t.Skip("no Postgres")
	}
	const password, token = "pa55-w0rd-only-here", "t0ken-only-here"
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	table := tableName(t)
	db, _ := liveDB(t, liveDSN{"postgres", pg})
	t.Cleanup(func() { db.Exec(`DROP TABLE IF EXISTS "` + table + `"`) })
	// The limits' and rates' tables are the database's, shared by its job tables (keyed by the
	// table's name): -limits -rates creates them where they are not there.
	if code, stdout, stderr := runCommand(t, nil, "schema", "-dsn", u.String(), "-table", table, "-limits", "-rates", "-apply"); code != 0 {
		t.Fatalf("inbox schema -apply: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := db.Exec(`INSERT INTO "` + table + `" (queue, payload, dead_at, last_error) VALUES ('q', '{"a":1}', now(), 'boom')`); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, built(t), "ui", "-dsn", u.String(), "-table", table, "-addr", "127.0.0.1:0", "-token", token)
	cmd.Env = withoutDSN(os.Environ())
	var stdout, stderr inboxtest.Log
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/)`)
	var base string
	for base == "" {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
		} else if ctx.Err() != nil {
			t.Fatalf("inbox ui did not say where it listens:\n%s%s", stdout.String(), stderr.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var headers strings.Builder
		resp.Header.Write(&headers)
		return resp.StatusCode, headers.String() + string(b)
	}
	if code, _ := get("rows"); code != http.StatusUnauthorized {
		t.Errorf("GET /rows without the token: %d, want 401", code)
	}
	if code, body := get("healthz"); code != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("GET /healthz: %d, want 200 ok without the token", code)
	}
	var pages strings.Builder
	for _, path := range []string{"?token=" + token, "rows?state=dead", "rows/1", "limits"} {
		code, body := get(path)
		if code != http.StatusOK {
			t.Errorf("GET /%s: %d\n%s", path, code, body)
		}
		pages.WriteString(body)
	}
	if !strings.Contains(pages.String(), "boom") || !strings.Contains(pages.String(), ":xxxxx@") {
		t.Errorf("the pages do not show the row, or the DSN redacted:\n%s", pages.String())
	}
	if !strings.Contains(pages.String(), "Concurrency limits") || !strings.Contains(pages.String(), "Rate limits") {
		t.Errorf("the limits page does not list the limits and the rates the database has tables for:\n%s", pages.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("inbox ui, interrupted: exit %d, want 0\n%s", code, stderr.String())
	}
	all := pages.String() + stdout.String() + stderr.String()
	for _, secret := range []string{password, url.QueryEscape(password)} {
		if strings.Contains(all, secret) {
			t.Errorf("the password shows:\n%s", all)
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), token) {
		t.Errorf("the output shows the token:\n%s%s", stdout.String(), stderr.String())
	}
}
