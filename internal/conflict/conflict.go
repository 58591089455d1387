// Package conflict runs a statement again when the database reports a transient conflict, the
// one way every form does: a serialization failure or a deadlock (Postgres), a deadlock, a lock
// wait timeout or a Galera certification failure (MySQL, MariaDB), SQLITE_BUSY (SQLite), as
// the dialect classifies them (dialect.Dialect.Retryable), within the dialect's budget of tries
// (dialect.Caps.ConflictTries).
package conflict

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// ErrTooMany marks the error of an operation that conflicted in every try its budget allowed.
var ErrTooMany = errors.New("conflicted in every try")

// Retry runs op until it succeeds, fails with an error that is not a transient conflict, has
// conflicted in each of the dialect's tries, or ctx ends. Between tries it pauses a short random
// time that grows with each try, so that operations which collided do not collide again in step.
// Its error is op's last; after the last try it also wraps ErrTooMany. op must be safe to run
// again after a conflict: the transaction it ran in changed nothing, or a guard makes a repeat
// change nothing.
func Retry(ctx context.Context, d dialect.Dialect, op func() error) error {
	tries := d.Caps().ConflictTries
	for try := 1; ; try++ {
		err := op()
		if err == nil || !d.Retryable(err) || ctx.Err() != nil {
			return err
		}
		if try >= tries {
			return errors.Join(ErrTooMany, err)
		}
		pause := time.Duration(try) * time.Duration(1+rand.IntN(5)) * time.Millisecond
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}
