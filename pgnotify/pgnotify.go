// Package pgnotify wakes consumers of a Postgres inbox table when a row is published, in any
// process: where the table's description sets Notify, Enqueue and EnqueueTx notify the table's
// channel (inbox.NotifyChannel) in their own statement, which Postgres delivers at the
// publishing transaction's commit, and a Listener set as the consumer's Config.Wakeups listens
// to it on a connection of its own. Publishers and consumers share the description, Notify
// included.
//
// It is a module of its own, so that the library stays free of drivers: it listens through
// github.com/jackc/pgx/v5.
package pgnotify

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sqlinbox/inbox"
)

// Listener is an inbox.Waker that listens to a table's notification channel on a connection of
// its own (not one of the consumer's pool), one per consumer it serves. After its connection
// fails it connects again, backing off from 100 ms up to 5 s between attempts, and once it
// listens again it wakes the consumer, since notifications sent meanwhile are lost. Each
// notification wakes every idle worker of the consumer at once.
type Listener struct {
	// ConnString is the pgx connection string (a URL or key=value pairs) of the database the
	// table is in. Required. Through PgBouncer it must reach a session pool: LISTEN holds a
	// session.
	ConnString string
}

// Watch implements inbox.Waker: it listens until ctx is done.
func (l *Listener) Watch(ctx context.Context, table string, log *slog.Logger, wake func()) {
	channel := pgx.Identifier{inbox.NotifyChannel(table)}.Sanitize()
	backoff := minBackoff
	for ctx.Err() == nil {
		listened, err := l.listen(ctx, channel, wake)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = minBackoff
		}
		// log names the consumer's queue and table already (inbox.Waker).
		log.Warn("inbox: listening for notifications failed; connecting again, and meanwhile the consumer polls", "channel", channel, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// listen connects, listens to channel, wakes once and then at each notification, until the
// connection fails or ctx is done. It reports whether it listened.
func (l *Listener) listen(ctx context.Context, channel string, wake func()) (bool, error) {
	conn, err := pgx.Connect(ctx, l.ConnString)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return false, err
	}
	wake() // rows published while no one listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		wake()
	}
}
