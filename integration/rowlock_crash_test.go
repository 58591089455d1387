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
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The environment that turns the test binary into the crash test's child: the backend's name,
// its DSN and the table.
const (
	rowlockCrashChildEnv = "INBOX_ROWLOCK_CRASH_CHILD"
	rowlockCrashDSNEnv   = "INBOX_ROWLOCK_CRASH_DSN"
	rowlockCrashTableEnv = "INBOX_ROWLOCK_CRASH_TABLE"
)

// TestRowlockCrash kills (SIGKILL) a child process whose handlers hold rows, and checks that
// another consumer, already running, handles those rows within a second of the kill, with
// their attempt counts unmoved: the database rolled the child's transactions back.
func TestRowlockCrash(t *testing.T) {
	if os.Getenv(rowlockCrashChildEnv) != "" {
		rowlockCrashChild()
		return
	}
	const held = 3
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		c.publish(t, messages("q", held)...)

		child := exec.Command(os.Args[0], "-test.run=^TestRowlockCrash$", "-test.count=1", "-test.timeout=2m")
		child.Env = append(os.Environ(), rowlockCrashChildEnv+"="+b.name, rowlockCrashDSNEnv+"="+b.dsn, rowlockCrashTableEnv+"="+c.tbl.Name)
		child.Stderr = os.Stderr
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { child.Process.Kill(); child.Wait() })

		holding := map[int64]bool{}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		timeout := time.After(30 * time.Second)
		for len(holding) < held {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the child exited holding %d rows, want %d", len(holding), held)
				}
				if id, found := strings.CutPrefix(line, "holding "); found {
					n, err := strconv.ParseInt(id, 10, 64)
					if err != nil {
						t.Fatalf("child said %q", line)
					}
					holding[n] = true
				}
			case <-timeout:
				t.Fatalf("the child holds %d rows after 30 s, want %d", len(holding), held)
			}
		}

		var (
			mu       sync.Mutex
			handled  = map[int64]time.Duration{} // row: when, after the kill
			attempts = map[int64]int{}
			killedAt time.Time
			all      = make(chan struct{})
		)
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			mu.Lock()
			defer mu.Unlock()
			if killedAt.IsZero() {
				t.Errorf("row %d was claimed while the child held it", d.ID)
			}
			handled[d.ID] = time.Since(killedAt)
			attempts[d.ID] = d.Attempt
			if len(handled) == held {
				close(all)
			}
			return outcome.Ack()
		})
		stop := startConsumer(t, inbox.NewConsumer(c.db, rowlock.New(b.dialect.(rowlock.Dialect), c.tbl), h,
			&inbox.Config{Queue: "q", Workers: held, PollInterval: 20 * time.Millisecond}))
		// Let the consumer claim a few times while the child holds every row: it must pass
		// them over without waiting.
		time.Sleep(200 * time.Millisecond)

		mu.Lock()
		killedAt = time.Now()
		if err := child.Process.Kill(); err != nil { // SIGKILL: no deferred rollback runs
			t.Fatal(err)
		}
		mu.Unlock()
		child.Wait()

		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Error("the killed child's rows were not handled within 10 s")
		}
		stop()
		mu.Lock()
		defer mu.Unlock()
		for id := range holding {
			after, ok := handled[id]
			switch {
			case !ok:
				t.Errorf("row %d the child held was never handled", id)
			case after > time.Second:
				t.Errorf("row %d was handled %v after the kill, want within a second", id, after)
			default:
				t.Logf("row %d handled %v after the kill", id, after)
			}
			if attempts[id] != 1 {
				t.Errorf("row %d delivered with attempt %d after the crash, want 1 (a crash costs no attempt)", id, attempts[id])
			}
			if a := c.attemptOf(t, id); a != 0 {
				t.Errorf("row %d's attempt column is %d, want 0", id, a)
			}
		}
	})
}

// rowlockCrashChild is the child: a consumer whose handlers say which row they hold, then block
// until the parent kills the process. It exits on its own after a minute, should the parent
// die first.
func rowlockCrashChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	name := os.Getenv(rowlockCrashChildEnv)
	d, driver := rowlock.Dialect(dialect.Postgres[isolation.Default]{}), "pgx"
	switch name {
	case "mysql":
		d, driver = dialect.MySQL[isolation.Default]{}, "mysql"
	case "mariadb":
		d, driver = dialect.MariaDB[isolation.Default]{}, "mysql"
	}
	db, err := sql.Open(driver, os.Getenv(rowlockCrashDSNEnv))
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
	cons := inbox.NewConsumer(db, rowlock.New(d, fullTable(os.Getenv(rowlockCrashTableEnv))), h,
		&inbox.Config{Queue: "q", Workers: 8, PollInterval: 20 * time.Millisecond})
	go func() {
		if err := cons.Run(context.Background()); err != nil {
			fail(err)
		}
	}()
	time.Sleep(time.Minute)
	fail(fmt.Errorf("not killed within a minute"))
}
