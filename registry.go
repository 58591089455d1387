package inbox

import (
	"database/sql"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"sync"
)

// consuming records the forms and queues consumed in this process.
var consuming struct {
	sync.Mutex
	forms  map[Form]bool
	queues map[queueKey]bool
}

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

func claimQueue(db *sql.DB, table, queue string) (stop func(), err error) {
	key := queueKey{db, table, queue}
	consuming.Lock()
	defer consuming.Unlock()
	if consuming.queues[key] {
		return nil, sentinel.Errorf(ErrAlreadyConsuming, sentinel.Queue(table, queue), "the queue already has a consumer in this process: run one consumer with more Workers")
	}
	if consuming.queues == nil {
		consuming.queues = map[queueKey]bool{}
	}
	consuming.queues[key] = true
	return func() {
		consuming.Lock()
		defer consuming.Unlock()
		delete(consuming.queues, key)
	}, nil
}
