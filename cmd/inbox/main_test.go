package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/inboxtest"
)

// The tests of this file run the command as a process, built once from this package.

var (
	buildOnce sync.Once
	buildDir  string
	binary    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// built returns the path of the inbox command, built from this package.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "inbox-command-"); buildErr != nil {
			return
		}
		binary = filepath.Join(buildDir, "inbox")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// runCommand runs the built command with args and the environment, INBOX_DSN unset unless
// environ sets it, and returns its exit status and output.
func runCommand(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, built(t), args...)
	cmd.Env = append(withoutDSN(os.Environ()), environ...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running inbox %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

func withoutDSN(environ []string) []string {
	var kept []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "INBOX_DSN=") {
			kept = append(kept, kv)
		}
	}
	return kept
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func TestCommandDemoOnSQLite(t *testing.T) {
	code, stdout, stderr := runCommand(t, nil, "demo", "-n", "30", "-workers", "2", "-fail-every", "10")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"database  sqlite at ", "table     inbox_demo: creating it in ", "messages  30 processed (the table says 30)", "attempts  33 in all", "dropped   table inbox_demo"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestCommandRefusesAnUnknownScheme checks that a DSN of a scheme the command does not take is
// a usage error naming the schemes it takes, and that it hides the DSN's password.
func TestCommandRefusesAnUnknownScheme(t *testing.T) {
	for _, dsn := range []string{"pg://app:s3cret@db.example/orders", "postgress://app:s3cret@db.example/orders"} {
		code, stdout, stderr := runCommand(t, nil, "demo", "-dsn", dsn, "-n", "10")
		if code != 2 {
			t.Errorf("inbox demo -dsn %s: exit %d; want 2", dsn, code)
		}
		scheme, _, _ := strings.Cut(dsn, ":")
		for _, want := range []string{"unknown scheme " + scheme, "postgres://, postgresql://, mysql://, mariadb://, sqlite:// or file:", "app:xxxxx@db.example"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("inbox demo -dsn %s: stderr lacks %q:\n%s", dsn, want, stderr)
			}
		}
		if strings.Contains(stdout+stderr, "s3cret") {
			t.Errorf("inbox demo -dsn %s: the output shows the password:\n%s%s", dsn, stdout, stderr)
		}
		if stdout != "" {
			t.Errorf("inbox demo -dsn %s: stdout %q; want nothing", dsn, stdout)
		}
	}
}

// TestCommandLeavesATableItDidNotCreate points the demo at a SQLite file holding a table named
// as the demo's: the demo must not touch it.
func TestCommandLeavesATableItDidNotCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE inbox_demo (id INTEGER PRIMARY KEY, note TEXT); INSERT INTO inbox_demo VALUES (7, 'keep me')"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCommand(t, nil, "demo", "-dsn", path, "-n", "10")
	if code != 1 || !strings.Contains(stderr, "the demo did not create it") {
		t.Errorf("exit %d; want 1 and an error saying the demo did not create the table:\n%s%s", code, stdout, stderr)
	}
	var note string
	if err := db.QueryRow("SELECT note FROM inbox_demo WHERE id = 7").Scan(&note); err != nil || note != "keep me" {
		t.Errorf("the table's row after the demo: %q, %v", note, err)
	}
}

// TestCommandHidesThePasswordTheServerRefused gives MariaDB a password it refuses: the error says
// so without the password.
func TestCommandHidesThePasswordTheServerRefused(t *testing.T) {
	const password = "wr@ng:pa/ss"
	addr := strings.TrimPrefix(env("INBOX_MARIADB_DSN", env("INBOX_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test")), "mysql://")
	user, rest, ok := strings.Cut(addr, "@")
	if !ok {
		t.Fatalf("INBOX_MARIADB_DSN %q has no user", addr)
	}
	user, _, _ = strings.Cut(user, ":")
	dsn := "mysql://" + user + ":" + password + "@" + rest
	code, stdout, stderr := runCommand(t, nil, "demo", "-dsn", dsn, "-n", "10")
	if !strings.Contains(stderr, "Access denied") {
		if os.Getenv("INBOX_REQUIRE_DATABASES") == "1" {
			t.Fatalf("database required (INBOX_REQUIRE_DATABASES=1): exit %d\n%s%s", code, stdout, stderr)
		}
		t.Skipf("MariaDB did not answer: %s", stderr)
	}
	if code != 1 {
		t.Errorf("exit %d; want 1", code)
	}
	if strings.Contains(stdout+stderr, password) || !strings.Contains(stderr, user+":xxxxx@") {
		t.Errorf("the output shows the password, or not the DSN redacted:\n%s%s", stdout, stderr)
	}
}

// TestCommandUsage checks the exit statuses and where the usage goes, and that the usage lists
// the commands that exist and no others.
func TestCommandUsage(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		stream string // where the usage or the error goes
		says   string
	}{
		{nil, 2, "stderr", "usage: inbox <command> [flags]"},
		{[]string{"help"}, 0, "stdout", "usage: inbox <command> [flags]"},
		{[]string{"-h"}, 0, "stdout", "A DSN names the database by its scheme"},
		{[]string{"frob"}, 2, "stderr", `inbox: unknown command "frob"`},
		{[]string{"demo", "-frob"}, 2, "stderr", "flag provided but not defined: -frob"},
		{[]string{"demo", "-h"}, 0, "stderr", "usage: inbox demo [flags]"},
		{[]string{"demo", "-n", "0"}, 2, "stderr", "inbox demo: -n and -workers must be at least 1"},
		{[]string{"demo", "extra"}, 2, "stderr", `inbox demo: unexpected argument "extra"`},
		{[]string{"version", "extra"}, 2, "stderr", `inbox version: unexpected argument "extra"`},
	} {
		code, stdout, stderr := runCommand(t, nil, c.args...)
		out, other := stderr, stdout
		if c.stream == "stdout" {
			out, other = stdout, stderr
		}
		if code != c.code || !strings.Contains(out, c.says) || other != "" {
			t.Errorf("inbox %s: exit %d, stdout %q, stderr %q; want exit %d and %q on %s only", strings.Join(c.args, " "), code, stdout, stderr, c.code, c.says, c.stream)
		}
	}
	_, stdout, _ := runCommand(t, nil, "help")
	_, list, _ := strings.Cut(stdout, "commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	if got := strings.Join(names, " "); got != "demo schema stats rows show reschedule pause resume rates cancel dead purge schedules limits groups ui version" {
		t.Errorf("the usage lists the commands %q; want %q", got, "demo schema stats rows show reschedule pause resume rates cancel dead purge schedules limits groups ui version")
	}
	for _, name := range names {
		if code, _, stderr := runCommand(t, nil, name, "-h"); code != 0 || !strings.Contains(stderr, "usage: inbox "+name) {
			t.Errorf("inbox %s -h: exit %d, %q", name, code, stderr)
		}
	}
}

// TestCommandTakesTheDSNFromTheEnvironment runs the demo with INBOX_DSN and no -dsn.
func TestCommandTakesTheDSNFromTheEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "from-env.db")
	code, stdout, stderr := runCommand(t, []string{"INBOX_DSN=sqlite://" + path}, "demo", "-n", "10")
	if code != 0 || !strings.Contains(stdout, "database  sqlite at "+path+" (from $INBOX_DSN)\n") {
		t.Errorf("exit %d; want 0 and the database at %s:\n%s%s", code, path, stdout, stderr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the demo's database: %v", err)
	}
	code, stdout, stderr = runCommand(t, []string{"INBOX_DSN=pg://app:s3cret@h/db"}, "demo", "-n", "10")
	if code != 2 || !strings.Contains(stderr, "inbox demo: $INBOX_DSN: DSN pg://app:xxxxx@h/db: unknown scheme pg") {
		t.Errorf("a bad INBOX_DSN: exit %d; want 2 and an error naming INBOX_DSN:\n%s%s", code, stdout, stderr)
	}
}

func TestCommandVersion(t *testing.T) {
	code, stdout, stderr := runCommand(t, nil, "version")
	want := "inbox    (devel)\nlibrary  github.com/sqlinbox/inbox (devel)\ngo       " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
	}
}

// TestCommandDemoInterrupted interrupts the demo while it drains: it exits with 130 and drops
// its table all the same.
func TestCommandDemoInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "interrupted.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, built(t), "demo", "-dsn", path, "-n", "50000", "-workers", "1")
	cmd.Env = withoutDSN(os.Environ())
	// The demo writes its output while the test reads it.
	var stdout inboxtest.Log
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !stdout.Contains("draining") {
		if ctx.Err() != nil {
			t.Fatalf("the demo did not start draining:\n%s", stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "inbox demo: interrupted") {
		t.Errorf("exit %d; want 130 and an error saying the demo was interrupted:\n%s", code, stderr.String())
	}
	if !stdout.Contains("dropped   table inbox_demo") || stdout.Contains("messages  50000") {
		t.Errorf("the output of the demo interrupted:\n%s", stdout.String())
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'inbox_demo'").Scan(&tables); err != nil || tables != 0 {
		t.Errorf("after the demo was interrupted, tables named inbox_demo: %d (%v)", tables, err)
	}
}
