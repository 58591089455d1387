package integration

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The environment that turns the test binary into TestCancelSurvivesCrash's child: the
// backend's name, its DSN and the table.
const (
	cancelCrashChildEnv = "INBOX_CANCEL_CRASH_CHILD"
	cancelCrashDSNEnv   = "INBOX_CANCEL_CRASH_DSN"
	cancelCrashTableEnv = "INBOX_CANCEL_CRASH_TABLE"
)

// TestCancelSurvivesCrash: rows in work in a child process (row lock form, whose poll would not
// come for an hour) are cancelled (CancelRequested), and the child is killed (SIGKILL) before it
// tells its handlers: the rows return to the queue with their requests, which no claim takes,
// and another consumer's poll cancels every one within seconds, none run again. On Postgres,
// MySQL and MariaDB.
func TestCancelSurvivesCrash(t *testing.T) {
	if os.Getenv(cancelCrashChildEnv) != "" {
		cancelCrashChild()
		return
	}
	const held = 3
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		createCancels(t, db, b)
		tbl := b.newTable(t, db, cancelTable)
		b.enqueue(t, db, tbl, messages("q", held)...)
		child := exec.Command(os.Args[0], "-test.run=^TestCancelSurvivesCrash$", "-test.count=1", "-test.timeout=2m")
		child.Env = append(os.Environ(), cancelCrashChildEnv+"="+b.name, cancelCrashDSNEnv+"="+b.dsn, cancelCrashTableEnv+"="+tbl.Name)
		child.Stderr = os.Stderr
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { child.Process.Kill(); child.Wait() })
		ids := childHolds(t, out, held)

		got, err := inbox.Cancel(context.Background(), db, b.dialect, tbl, ids...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if r.Outcome != inbox.CancelRequested {
				t.Errorf("row %d held by the child: %v, want a request", r.ID, r.Outcome)
			}
		}
		if err := child.Process.Kill(); err != nil { // SIGKILL: the child's transactions end with it
			t.Fatal(err)
		}
		child.Wait()

		var ran atomic.Int64
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			ran.Add(1)
			return outcome.Ack()
		})
		runConsumer(t, db, rowlock.New(b.dialect.(rowlock.Dialect), tbl), h,
			&inbox.Config{Queue: "q", Workers: held, CancelPoll: cancelPoll, PollInterval: cellPoll})
		waitFor(t, 10*time.Second, "every row the child held cancelled", func() bool {
			return b.countRows(t, db, tbl, b.q(t, tbl.CancelledAt)+" IS NOT NULL AND "+b.q(t, tbl.ProcessedAt)+" IS NULL") == held
		})
		if n := ran.Load(); n != 0 {
			t.Errorf("%d rows whose cancel was requested ran again after the crash", n)
		}
		waitFor(t, 5*time.Second, "no request left", func() bool {
			return count(t, db, "SELECT COUNT(*) FROM inbox_cancels WHERE table_name = "+b.dialect.Placeholder(1), tbl.Name) == 0
		})
	})
}

// childHolds reads the ids of the n rows the child says it holds.
func childHolds(t *testing.T, out interface{ Read([]byte) (int, error) }, n int) []int64 {
	t.Helper()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var ids []int64
	timeout := time.After(30 * time.Second)
	for len(ids) < n {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the child exited holding %d rows, want %d", len(ids), n)
			}
			if s, found := strings.CutPrefix(line, "holding "); found {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
				ids = append(ids, id)
			}
		case <-timeout:
			t.Fatalf("the child holds %d rows after 30 s, want %d", len(ids), n)
		}
	}
	go func() {
		for range lines {
		}
	}()
	return ids
}

// cancelCrashChild is the child: a row lock consumer whose cancel poll would not come for an
// hour, whose handlers say which row they hold, then block until the parent kills the process.
func cancelCrashChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "cancel crash child:", err)
		os.Exit(2)
	}
	d, driver := rowlock.Dialect(dialect.Postgres[isolation.Default]{}), "pgx"
	switch os.Getenv(cancelCrashChildEnv) {
	case "mysql":
		d, driver = dialect.MySQL[isolation.Default]{}, "mysql"
	case "mariadb":
		d, driver = dialect.MariaDB[isolation.Default]{}, "mysql"
	}
	db, err := sql.Open(driver, os.Getenv(cancelCrashDSNEnv))
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(16)
	var out sync.Mutex
	h := inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		out.Lock()
		fmt.Printf("holding %d\n", dl.ID)
		out.Unlock()
		select {} // until SIGKILL
	})
	cons := inbox.NewConsumer(db, rowlock.New(d, cancelTable(os.Getenv(cancelCrashTableEnv))), h,
		&inbox.Config{Queue: "q", Workers: 8, PollInterval: 20 * time.Millisecond, CancelPoll: time.Hour})
	go func() {
		if err := cons.Run(context.Background()); err != nil {
			fail(err)
		}
	}()
	time.Sleep(time.Minute)
	fail(fmt.Errorf("not killed within a minute"))
}
