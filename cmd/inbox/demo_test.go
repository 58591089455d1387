package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// runDemo runs inbox demo in the test's process, with the environment empty, and returns its
// exit status and output.
func runDemo(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code = run(ctx, append([]string{"demo"}, args...), &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

// openLive opens the database of l for a test's own statements (liveDB), and names the demo's
// table of the test's own (tableName), dropped when the test ends.
func openLive(t *testing.T, l liveDSN) (target, *demoOwned) {
	t.Helper()
	db, tg := liveDB(t, l)
	o, err := newDemoOwned(db, tg.dialect, tableName(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + o.quoted) })
	return tg, o
}

func TestDemoCreatesItsTableSaysSoAndDropsIt(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			tg, o := openLive(t, l)
			code, stdout, stderr := runDemo(t, "-dsn", l.dsn, "-table", o.name, "-n", "40", "-workers", "2", "-fail-every", "10")
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			for _, want := range []string{
				fmt.Sprintf("database  %s at %s\n", l.name, tg.shown),
				fmt.Sprintf("table     %s: creating it in %s, marked as the demo's, to be dropped when the demo ends\n", o.name, tg.shown),
				"messages  40 processed (the table says 40)\n",
				"attempts  44 in all (the table's attempt column), 4 retries\n",
				fmt.Sprintf("dropped   table %s\n", o.name),
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("the output lacks %q:\n%s", want, stdout)
				}
			}
			if stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
			if exists, _, err := o.lookup(context.Background()); err != nil || exists {
				t.Errorf("after the demo, table %s exists: %v (%v)", o.name, exists, err)
			}
		})
	}
}

// TestDemoHidesThePassword runs the demo against Postgres with a password of odd characters in
// its DSN (the test server trusts local logins, so any password connects): neither the output
// nor the errors show it.
func TestDemoHidesThePassword(t *testing.T) {
	for _, l := range liveDSNs(t) {
		if l.name != "postgres" {
			continue
		}
		u, err := url.Parse(l.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, set := u.User.Password(); set {
			t.Skip("INBOX_POSTGRES_DSN has a password of its own")
		}
		const password = "a@b:c/d?e f"
		u.User = url.UserPassword(u.User.Username(), password)
		_, o := openLive(t, l)
		code, stdout, stderr := runDemo(t, "-dsn", u.String(), "-table", o.name, "-n", "20", "-workers", "2")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		shown := "postgres://" + u.User.Username() + ":xxxxx@" + u.Host + u.RequestURI()
		if !strings.Contains(stdout, "database  postgres at "+shown+"\n") {
			t.Errorf("the output does not show %s:\n%s", shown, stdout)
		}
		for _, leak := range []string{password, url.UserPassword("", password).String()[1:]} {
			if strings.Contains(stdout+stderr, leak) {
				t.Errorf("the output shows the password as %q:\n%s%s", leak, stdout, stderr)
			}
		}
		// The same DSN with the table of another, which the demo refuses, naming the DSN in its error.
		if _, err := o.db.Exec("CREATE TABLE " + o.quoted + " (id INT)"); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr = runDemo(t, "-dsn", u.String(), "-table", o.name, "-n", "20")
		if code != 1 || !strings.Contains(stderr, shown) || strings.Contains(stdout+stderr, password) {
			t.Errorf("exit %d; want 1, an error naming %s without the password:\n%s%s", code, shown, stdout, stderr)
		}
	}
}

func TestDemoLeavesATableItDidNotCreateAlone(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			tg, o := openLive(t, l)
			ctx := context.Background()
			if _, err := o.db.ExecContext(ctx, "CREATE TABLE "+o.quoted+" (id INT, note VARCHAR(20))"); err != nil {
				t.Fatal(err)
			}
			if _, err := o.db.ExecContext(ctx, "INSERT INTO "+o.quoted+" (id, note) VALUES (7, 'keep me')"); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runDemo(t, "-dsn", l.dsn, "-table", o.name, "-n", "20")
			if code != 1 {
				t.Errorf("exit %d; want 1\n%s%s", code, stdout, stderr)
			}
			want := fmt.Sprintf("inbox demo: table %s exists in %s, and the demo did not create it (it has no mark of the demo's): the demo leaves it alone; name another table with -table, or drop it yourself\n", o.name, tg.shown)
			if stderr != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
			}
			var note string
			if err := o.db.QueryRowContext(ctx, "SELECT note FROM "+o.quoted+" WHERE id = 7").Scan(&note); err != nil || note != "keep me" {
				t.Errorf("the table's row after the demo: %q, %v", note, err)
			}
		})
	}
}

// TestDemoReplacesATableAnEarlierDemoLeft leaves a marked table as a demo killed before its end
// would, and runs the demo on it.
func TestDemoReplacesATableAnEarlierDemoLeft(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			_, o := openLive(t, l)
			ctx := context.Background()
			if err := o.createMarked(ctx); err != nil {
				t.Fatal(err)
			}
			if exists, mark, err := o.lookup(ctx); err != nil || !exists || mark != o.mark {
				t.Fatalf("the earlier demo's table: exists %v, mark %q (%v); want the mark %q", exists, mark, err, o.mark)
			}
			code, stdout, stderr := runDemo(t, "-dsn", l.dsn, "-table", o.name, "-n", "20", "-workers", "2")
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			if want := fmt.Sprintf("table     %s was left by an earlier demo (%q): dropping it\n", o.name, o.mark); !strings.Contains(stdout, want) {
				t.Errorf("the output lacks %q:\n%s", want, stdout)
			}
			if exists, _, err := o.lookup(ctx); err != nil || exists {
				t.Errorf("after the demo, table %s exists: %v (%v)", o.name, exists, err)
			}
		})
	}
}

// TestDemoDropsOnlyItsOwnRun checks that a demo drops its table only while the table carries its
// run's mark: another run's table of the same name stays.
func TestDemoDropsOnlyItsOwnRun(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			_, mine := openLive(t, l)
			ctx := context.Background()
			theirs, err := newDemoOwned(mine.db, mine.d, mine.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := theirs.createMarked(ctx); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := mine.drop(ctx, &out); !errors.Is(err, errNotOurs) {
				t.Errorf("dropping another run's table: %v; want errNotOurs", err)
			}
			if exists, mark, err := mine.lookup(ctx); err != nil || !exists || mark != theirs.mark {
				t.Errorf("after the refused drop: exists %v, mark %q (%v); want the other run's table", exists, mark, err)
			}
			if err := theirs.drop(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if exists, _, err := mine.lookup(ctx); err != nil || exists {
				t.Errorf("after its own run dropped it, the table exists: %v (%v)", exists, err)
			}
		})
	}
}
