package inbox

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// RetryPolicy says how long a row waits before its next delivery, by the attempt that just
// failed (Delivery.Attempt, 1 for the first). A consumer applies it to a Retry, the zero
// outcome, a panic, a handler's error and a failed settlement; an explicit outcome.RetryAfter
// keeps its own delay. Delay must be safe for concurrent use.
type RetryPolicy interface {
	Delay(attempt int) time.Duration
}

// ExponentialBackoff doubles the delay with each attempt, from Base up to Max, with equal
// jitter: for attempt n, d = min(Max, Base·2^(n-1)), and the delay is drawn uniformly from
// [d/2, d). It is the default policy with Base 1 s and Max 1 h (zero fields take those).
//
// Why this shape, against the peers: River waits attempt⁴ seconds ±10 %, asynq n⁴ + 15 s + a
// random part, gue multiplies by 1.6. The half that is never random is a floor (a failing row
// never comes back at once, so it cannot starve the good rows behind it, which a retry at once
// did: it sorted first and won every claim); the random half spreads rows that failed together
// (an outage) so that they do not return as a herd; and the cap keeps a long outage from
// pushing rows days away, where a polynomial grows without bound (attempt 25 under River's
// formula waits 4.5 days). With the defaults and 25 attempts a row that always fails is dead
// after about 9.9 hours on average (between 6.6 and 13.1 hours, plus its handlers' time): the
// waits after attempts 1 to 12 come to 34 to 68 minutes together, and each of the 12 waits
// after attempts 13 to 24 is drawn from [30 min, 1 h).
type ExponentialBackoff struct {
	Base time.Duration // the first retry's delay before jitter; default 1 s
	Max  time.Duration // the cap before jitter; default 1 h
}

// Delay is the wait after attempt (see ExponentialBackoff).
func (b ExponentialBackoff) Delay(attempt int) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = time.Second
	}
	if limit <= 0 {
		limit = time.Hour
	}
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(d-half)
}

// RetryAtOnce is the policy that never delays: a failed row is claimable again at once. It is the
// explicit choice for a table without a RetryAfter column, where a delaying policy (the default
// included) is refused; a row that keeps failing then comes back first at every claim, so keep
// Config.MaxAttempts bounded there.
var RetryAtOnce RetryPolicy = atOnce{}

type atOnce struct{}

func (atOnce) Delay(int) time.Duration { return 0 }

// DefaultMaxAttempts is the attempt limit of a consumer whose Config.MaxAttempts is zero.
const DefaultMaxAttempts = 25

// Permanent marks err as a failure that no retry mends: a handler adapter (Func, JSONFunc) that
// gets it back, wrapped or not, kills the row at once (outcome.Fail) with err's text as its
// last error. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// RetryIn marks err as a failure to retry after d, whatever the retry policy says: a handler
// adapter (Func, JSONFunc) that gets it back, wrapped or not, returns outcome.RetryAfter(d)
// with err as its reason. RetryIn(d, nil) is nil.
func RetryIn(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &retryInError{d, err}
}

type retryInError struct {
	d   time.Duration
	err error
}

func (e *retryInError) Error() string { return e.err.Error() }
func (e *retryInError) Unwrap() error { return e.err }

// Result is the outcome of a handler's error, as the adapters Func and JSONFunc settle it: nil
// acks; an error marked by Permanent fails the row at once; one marked by RetryIn retries
// after its delay; any other retries by the consumer's policy. The error is the outcome's
// reason (its text goes to last_error).
func Result(err error) outcome.Outcome {
	var p *permanentError
	var r *retryInError
	switch {
	case err == nil:
		return outcome.Ack()
	case errors.As(err, &p):
		return outcome.Fail(err)
	case errors.As(err, &r):
		return outcome.RetryAfter(r.d).WithError(err)
	}
	return outcome.Retry().WithError(err)
}
