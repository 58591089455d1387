package integration

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// Withdrawal is an order to take cents from an account.
type Withdrawal struct {
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

// wallet opens its transactions with BEGIN IMMEDIATE: a transaction takes SQLite's write lock
// when it begins, so no other writer changes a balance between a withdrawal's read and its
// write.
var wallet = dialect.SQLite[isolation.Immediate]{}

// withdrawalJobs is the inbox of withdrawals; the lease form keeps its expiry in locked_until.
var withdrawalJobs = inbox.Table{Name: "withdrawal_jobs", ID: "id", IDGenerated: true, Payload: "payload"}

var walletSchema = []string{
	"CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, cents INTEGER NOT NULL)",
	"CREATE TABLE IF NOT EXISTS withdrawal_jobs (id INTEGER PRIMARY KEY, payload BLOB, locked_until TEXT)",
}

// withdraw pays a withdrawal out of its account's balance, reading and writing the balance
// through the delivery's transaction: an Ack commits the new balance with the job's settlement,
// and a Retry rolls it back.
func withdraw(log *slog.Logger) func(ctx context.Context, d *inbox.Delivery, order Withdrawal) outcome.Outcome {
	return func(ctx context.Context, d *inbox.Delivery, order Withdrawal) outcome.Outcome {
		var balance int64
		err := d.Tx.QueryRowContext(ctx, "SELECT cents FROM balances WHERE account = ?", order.Account).Scan(&balance)
		if err != nil {
			return outcome.Retry()
		}
		if balance < order.Cents {
			log.Warn("insufficient funds", "account", order.Account, "cents", order.Cents)
			return outcome.Drop()
		}
		if _, err := d.Tx.ExecContext(ctx, "UPDATE balances SET cents = ? WHERE account = ?", balance-order.Cents, order.Account); err != nil {
			return outcome.Retry()
		}
		return outcome.Ack()
	}
}

// openWallet opens the wallet database in path and creates its tables.
func openWallet(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	for _, s := range walletSchema {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// drained waits until the inbox of withdrawals is empty: every job acked or dropped.
func drained(ctx context.Context, db *sql.DB) error {
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM withdrawal_jobs").Scan(&n); err != nil || n == 0 {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A withdrawal reads a balance and writes it back in the delivery's transaction, opened with
// BEGIN IMMEDIATE on SQLite; the lease form holds the job meanwhile.
func Example_withdrawal() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wallet")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := openWallet(ctx, filepath.Join(dir, "wallet.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "INSERT INTO balances (account, cents) VALUES ('alice', 100)"); err != nil {
		panic(err)
	}
	err = inbox.EnqueueJSON(ctx, db, wallet, withdrawalJobs, "withdrawals",
		Withdrawal{"alice", 30}, Withdrawal{"alice", 50}, Withdrawal{"alice", 40})
	if err != nil {
		panic(err)
	}

	// The handler's warnings, without their time, so that the example's output is stable.
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	consumer := inbox.NewConsumer(db, lease.New(wallet, withdrawalJobs, nil), inbox.JSON(withdraw(log)),
		&inbox.Config{Queue: "withdrawals", Transactional: true, Retry: inbox.RetryAtOnce})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx) }()
	if err := drained(ctx, db); err != nil {
		panic(err)
	}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}

	var balance int64
	if err := db.QueryRowContext(ctx, "SELECT cents FROM balances WHERE account = 'alice'").Scan(&balance); err != nil {
		panic(err)
	}
	fmt.Println("alice has", balance, "cents left")
	// Output:
	// level=WARN msg="insufficient funds" account=alice cents=40
	// alice has 20 cents left
}

// TestWithdrawalsNeverOverdraw runs the example's handler in two consumers on one SQLite file,
// four workers each, with far more withdrawals than the balances cover. Every payment is
// recorded in the same transaction as the balance it changes, so the ledger and the balances
// must agree, and no balance may go below zero.
func TestWithdrawalsNeverOverdraw(t *testing.T) {
	const (
		accounts = 3
		opening  = 1000
		orders   = 300
	)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "wallet.db")
	var dbs []*sql.DB
	for range 2 {
		db, err := openWallet(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	db := dbs[0]
	mustExec(t, db, "CREATE TABLE payments (job INTEGER PRIMARY KEY, account TEXT NOT NULL, cents INTEGER NOT NULL)")
	var want int64
	var batch []Withdrawal
	for i := range accounts {
		mustExec(t, db, "INSERT INTO balances (account, cents) VALUES (?, ?)", fmt.Sprint("acct", i), opening)
	}
	for range orders {
		w := Withdrawal{Account: fmt.Sprint("acct", rand.IntN(accounts)), Cents: 1 + rand.Int64N(50)}
		want += w.Cents
		batch = append(batch, w)
	}
	if want <= accounts*opening {
		t.Fatalf("the orders ask for %d cents, no more than the balances hold: the test would prove nothing", want)
	}
	if err := inbox.EnqueueJSON(ctx, db, wallet, withdrawalJobs, "withdrawals", batch...); err != nil {
		t.Fatal(err)
	}

	pay := withdraw(slog.New(slog.DiscardHandler))
	h := inbox.JSON(func(ctx context.Context, d *inbox.Delivery, order Withdrawal) outcome.Outcome {
		o := pay(ctx, d, order)
		if o.Kind() == outcome.KindAck {
			if _, err := d.Tx.ExecContext(ctx, "INSERT INTO payments (job, account, cents) VALUES (?, ?, ?)", d.ID, order.Account, order.Cents); err != nil {
				return outcome.Retry()
			}
		}
		return o
	})
	for _, db := range dbs {
		c := inbox.NewConsumer(db, lease.New(wallet, withdrawalJobs, nil), h, &inbox.Config{
			Queue: "withdrawals", Workers: 4, Transactional: true, Retry: inbox.RetryAtOnce,
			PollInterval: 20 * time.Millisecond, Logger: testLogger(t),
		})
		startConsumer(t, c)
	}
	waitFor(t, 2*time.Minute, "every withdrawal to be settled", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM withdrawal_jobs") == 0
	})

	for i := range accounts {
		account := fmt.Sprint("acct", i)
		balance := count(t, db, "SELECT cents FROM balances WHERE account = ?", account)
		paid := count(t, db, "SELECT COALESCE(SUM(cents), 0) FROM payments WHERE account = ?", account)
		if balance < 0 {
			t.Errorf("%s overdrawn: balance %d", account, balance)
		}
		if balance != opening-paid {
			t.Errorf("%s: balance %d, but %d opening less %d paid is %d", account, balance, opening, paid, opening-paid)
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payments"); n == 0 || n == orders {
		t.Errorf("%d of %d withdrawals paid; want some paid and some refused", n, orders)
	}
}
