package integration

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// rawValue runs query, which answers one value, on a raw driver connection; nil for no row.
func rawValue(ctx context.Context, conn driver.Conn, query string) (driver.Value, error) {
	rows, err := conn.(driver.QueryerContext).QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	return v[0], nil
}

// levelOfStatement is the isolation level a statement about to run on conn runs at, as InnoDB
// names it: inside a transaction, the transaction's (information_schema.innodb_trx lists it once
// it wrote, so the probe writes a row of probe first); in autocommit, the session's, at which
// each statement is a transaction of its own.
func levelOfStatement(ctx context.Context, conn driver.Conn, probe string) (string, error) {
	in, err := rawValue(ctx, conn, "SELECT @@in_transaction")
	if err != nil {
		return "", err
	}
	if text(in) == "0" {
		v, err := rawValue(ctx, conn, "SELECT @@SESSION.tx_isolation")
		return strings.ReplaceAll(text(v), "-", " "), err
	}
	if _, err := conn.(driver.ExecerContext).ExecContext(ctx, "INSERT INTO "+probe+" (n) VALUES (1)", nil); err != nil {
		return "", err
	}
	// innodb_trx is a cache InnoDB refreshes only when it was not read for 100 ms.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		v, err := rawValue(ctx, conn, "SELECT trx_isolation_level FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = CONNECTION_ID()")
		if err != nil || v != nil || time.Now().After(deadline) {
			return text(v), err
		}
	}
}

func text(v driver.Value) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// TestNextDueReadsAtReadCommitted: the query a consumer's idle worker asks when the queue's next
// delayed row falls due runs at READ COMMITTED on MySQL and MariaDB, the level their dialects
// open at by default, on sessions at the server's REPEATABLE READ. The level is read on the
// server, on the statement's connection, just before the statement runs.
func TestNextDueReadsAtReadCommitted(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		ctx := context.Background()
		plain := b.open(t, 2)
		if level := sessionLevelOf(t, plain); level != "REPEATABLE-READ" {
			t.Skipf("the server's sessions run at %s: the test needs REPEATABLE READ, which the statement must not run at", level)
		}
		tbl := b.newTable(t, plain, fullTable)
		probe := b.scratchTable(t, plain, tbl.Name+"_p", "n INT")
		var (
			mu     sync.Mutex
			levels []string
			errs   []error
		)
		db, _, err := hookedDB(b, b.dsn, func(e hookEvent) {
			if e.after || e.what != "query" || !strings.HasPrefix(e.query, "SELECT MIN(") {
				return
			}
			level, err := levelOfStatement(ctx, e.conn.inner, probe)
			mu.Lock()
			defer mu.Unlock()
			levels, errs = append(levels, level), append(errs, err)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(4)
		b.enqueue(t, plain, tbl, inbox.Message{Queue: "q", Payload: []byte("later"), Delay: time.Hour})
		h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
		stop := runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", PollInterval: 50 * time.Millisecond})
		waitFor(t, time.Minute, "the next-due query", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(levels) >= 2
		})
		stop()
		mu.Lock()
		defer mu.Unlock()
		for i, level := range levels {
			if errs[i] != nil {
				t.Fatalf("reading the statement's level: %v", errs[i])
			}
			if level != "READ COMMITTED" {
				t.Errorf("the next-due query ran at %s, want READ COMMITTED", level)
			}
		}
	})
}
