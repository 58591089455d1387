// Package sentinel holds the library's sentinel errors, so that the dialect package can wrap
// them without importing the root package. The root package re-exports each one.
package sentinel

import "errors"

var (
	LeaseLost        = errors.New("inbox: lease lost")
	Closed           = errors.New("inbox: closed")
	Dialect          = errors.New("inbox: dialect")
	Schema           = errors.New("inbox: schema")
	ServerTooOld     = errors.New("inbox: server too old")
	AlreadyConsuming = errors.New("inbox: already consuming")
	TransactionHeld  = errors.New("inbox: transaction held")
	TransactionEnded = errors.New("inbox: transaction ended")
	CommitUnknown    = errors.New("inbox: commit outcome unknown")
	DeathFailed      = errors.New("inbox: death failed")
)

// BacksOff reports whether a settlement that failed with err is one a form backs off by the
// consumer's policy (inbox.Binding.Backoff): a failure of its own (a statement the database
// refused), not a lost hold, a closed form, a transaction the handler held or the database
// ended, or a COMMIT whose outcome is unknown, each of which has its own rule.
func BacksOff(err error) bool {
	for _, e := range []error{LeaseLost, Closed, TransactionHeld, TransactionEnded, CommitUnknown} {
		if errors.Is(err, e) {
			return false
		}
	}
	return err != nil
}
