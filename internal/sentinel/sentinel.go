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
)
