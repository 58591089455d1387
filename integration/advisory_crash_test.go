package integration

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// The child process of TestAdvisoryCrash reads what to consume from these variables.
const (
	advisoryCrashChild   = "INBOX_ADVISORY_CRASH_CHILD" // the dialect's name
	advisoryCrashDriver  = "INBOX_ADVISORY_CRASH_DRIVER"
	advisoryCrashDSN     = "INBOX_ADVISORY_CRASH_DSN"
	advisoryCrashTable   = "INBOX_ADVISORY_CRASH_TABLE"
	advisoryCrashRows    = 3
	advisoryCrashRelease = time.Second // how soon after the kill the rows must be claimable
)

// TestAdvisoryCrash kills a consumer (SIGKILL) while it holds rows: the server ends its
// sessions, their locks go with them, and another consumer claims the rows within a second.
func TestAdvisoryCrash(t *testing.T) {
	if name := os.Getenv(advisoryCrashChild); name != "" {
		advisoryCrashHold(t, name)
		return
	}
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		b.enqueue(t, db, tbl, messages("q", advisoryCrashRows)...)

		cmd := exec.Command(os.Args[0], "-test.run=^TestAdvisoryCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			advisoryCrashChild+"="+b.name, advisoryCrashDriver+"="+b.driver,
			advisoryCrashDSN+"="+b.dsn, advisoryCrashTable+"="+tbl.Name)
		out, stderr, err := startPiped(cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})

		held := make(chan error, 1)
		go func() {
			lines := bufio.NewScanner(out)
			n := 0
			for n < advisoryCrashRows && lines.Scan() {
				if strings.HasPrefix(lines.Text(), "held ") {
					n++
				}
			}
			if n < advisoryCrashRows {
				held <- fmt.Errorf("the child reported %d held rows before its output ended", n)
				return
			}
			held <- nil
			for lines.Scan() { // drain, so the child never blocks on a full pipe
			}
		}()
		select {
		case err := <-held:
			if err != nil {
				t.Fatalf("%v; its stderr:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the child did not hold its rows; its stderr:\n%s", stderr.String())
		}

		other := openForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}"), db, inbox.Binding{Name: "q"})
		if ds := claim(t, other, advisoryCrashRows); len(ds) != 0 {
			t.Fatalf("claimed %v while the child held every row", deliveryIDs(ds))
		}

		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		killed := time.Now()
		var got []*inbox.Delivery
		for len(got) < advisoryCrashRows && time.Since(killed) < advisoryCrashRelease {
			got = append(got, claim(t, other, advisoryCrashRows-len(got))...)
			time.Sleep(10 * time.Millisecond)
		}
		if len(got) < advisoryCrashRows {
			t.Fatalf("%s after the kill, %d of the %d rows were claimable again", advisoryCrashRelease, len(got), advisoryCrashRows)
		}
		t.Logf("every row claimable again %s after the kill", time.Since(killed).Round(time.Millisecond))
		for _, d := range got {
			if d.Attempt != 2 {
				t.Errorf("row %d at attempt %d, want 2 (the child's take counted the first)", d.ID, d.Attempt)
			}
			settle(t, other, d, outcome.Ack())
		}
	})
}

// advisoryCrashHold is the child: it consumes the table with handlers that never return,
// reports each row it holds on stdout, and waits to be killed.
func advisoryCrashHold(t *testing.T, name string) {
	d, err := dialect.Parse(name, "")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(os.Getenv(advisoryCrashDriver), os.Getenv(advisoryCrashDSN))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(advisoryCrashRows + 2)
	tbl := fullTable(os.Getenv(advisoryCrashTable))
	f := advisory.New(d, tbl, &advisory.Config{Key: tbl.Name + "-{id}"})
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		fmt.Printf("held %d\n", d.ID)
		time.Sleep(time.Hour) // a sleeper, not a bare block, so the runtime sees no deadlock
		return outcome.Ack()
	})
	c := inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: advisoryCrashRows, PollInterval: 10 * time.Millisecond})
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
