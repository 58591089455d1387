package inbox

import (
	"database/sql"
	"slices"
	"sync"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// consuming records the forms and queues consumed in this process: for each queue, its
// consumers' claims.
var consuming struct {
	sync.Mutex
	forms  map[Form]bool
	queues map[queueKey][]*queueClaim
}

// queueClaim is one consumer's claim on a queue: the kinds it runs, nil for every row.
type queueClaim struct{ kinds []string }

type queueKey struct {
	db           *sql.DB
	table, queue string
}

func claimForm(f Form) error {
	consuming.Lock()
	defer consuming.Unlock()
	if consuming.forms[f] {
		return sentinel.Errorf(ErrAlreadyConsuming, "", "this form value is already opened by a running consumer: build one form per consumer")
	}
	if consuming.forms == nil {
		consuming.forms = map[Form]bool{}
	}
	consuming.forms[f] = true
	return nil
}

func releaseForm(f Form) {
	consuming.Lock()
	defer consuming.Unlock()
	delete(consuming.forms, f)
}

// claimQueue records a consumer of the queue in this process, claiming the rows of kinds (nil:
// every row), and returns the call that forgets it. It refuses a second consumer whose rows may
// be another's: of the whole queue, or of a kind another consumer of the queue claims. Consumers
// of disjoint kinds share a queue, as two services sharing a table do.
func claimQueue(db *sql.DB, table, queue string, kinds []string) (stop func(), err error) {
	key := queueKey{db, table, queue}
	consuming.Lock()
	defer consuming.Unlock()
	for _, other := range consuming.queues[key] {
		if other.kinds == nil || kinds == nil {
			return nil, sentinel.Errorf(ErrAlreadyConsuming, sentinel.Queue(table, queue), "the queue already has a consumer in this process: run one consumer with more Workers")
		}
		if i := slices.IndexFunc(kinds, func(k string) bool { return slices.Contains(other.kinds, k) }); i >= 0 {
			return nil, sentinel.Errorf(ErrAlreadyConsuming, sentinel.Queue(table, queue), "kind %q already has a consumer in this process: register each kind with one consumer", kinds[i])
		}
	}
	if consuming.queues == nil {
		consuming.queues = map[queueKey][]*queueClaim{}
	}
	mine := &queueClaim{kinds}
	consuming.queues[key] = append(consuming.queues[key], mine)
	return func() {
		consuming.Lock()
		defer consuming.Unlock()
		consuming.queues[key] = slices.DeleteFunc(consuming.queues[key], func(c *queueClaim) bool { return c == mine })
		if len(consuming.queues[key]) == 0 {
			delete(consuming.queues, key)
		}
	}, nil
}
