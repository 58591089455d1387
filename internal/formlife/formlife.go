// Package formlife is the life of a form (inbox.Form) between Open and Close: one binding at a
// time, calls admitted only while it stands, the holds in work that Close gives back, and Close
// waiting for the calls in flight before the form frees what they use.
//
// A form keeps its own binding (the database, the queue, its statements) in fields of its own:
// Open's bind writes them before the form opens, and Close's free after every call has left, so
// a call reads them without a lock between Enter (or Take) and Leave.
package formlife

import (
	"errors"
	"sync"
)

// Life is the lifecycle of one form value; H is the form's hold (a pointer). Its methods are
// safe for concurrent use. Build it with New.
type Life[H comparable] struct {
	closed error // what a call gets while the form is not open

	life sync.Mutex // serialises Open and Close

	mu    sync.Mutex
	open  bool           // written under life and mu, so either guards a read
	holds map[H]struct{} // the holds in work; nil while closed
	busy  sync.WaitGroup // calls in flight, and the goroutines they started (Go)
}

// New returns the life of a form that is not open; closed is what its calls get until Open and
// after Close (it wraps inbox.ErrClosed and names the table).
func New[H comparable](closed error) *Life[H] {
	return &Life[H]{closed: closed}
}

// Open binds the form: apart from any other Open and Close, it runs bind and, when bind
// succeeds, opens the form with no holds. On a form open already it runs already instead and
// returns its error (ErrAlreadyConsuming, naming the table). Both run while the form's binding
// stands still: they may read it.
func (l *Life[H]) Open(already, bind func() error) error {
	l.life.Lock()
	defer l.life.Unlock()
	if l.open {
		return already()
	}
	if err := bind(); err != nil {
		return err
	}
	l.mu.Lock()
	l.open, l.holds = true, map[H]struct{}{}
	l.mu.Unlock()
	return nil
}

// Enter admits a call while the form is open, and returns the closed error otherwise. An
// admitted call ends with Leave; Close waits for it. It allocates nothing.
func (l *Life[H]) Enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return l.closed
	}
	l.busy.Add(1)
	return nil
}

// Leave ends a call that Enter or Take admitted.
func (l *Life[H]) Leave() { l.busy.Done() }

// Go runs fn in a goroutine of its own, counted among the calls in flight, so that Close waits
// for it (a rollback that waits for a handler's statement, and the release after it). Only an
// admitted call, or Close's giveBack, may call it.
func (l *Life[H]) Go(fn func()) {
	l.busy.Add(1)
	go func() {
		defer l.busy.Done()
		fn()
	}()
}

// Keep records hs as held, so that Close gives them back, and reports true; on a form that is
// not open (Close ran during the claim that made them) it records none and reports false, and
// the caller gives them back itself.
func (l *Life[H]) Keep(hs ...H) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return false
	}
	for _, h := range hs {
		l.holds[h] = struct{}{}
	}
	return true
}

// Kept reports whether h is held: kept, and neither taken nor given back at Close.
func (l *Life[H]) Kept(h H) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.holds[h]
	return ok
}

// Forget forgets h, so that Close does not give it back: for a form whose calls end a hold under
// a lock of the hold's own (the lease form's), which Close's giveBack takes too.
func (l *Life[H]) Forget(h H) {
	l.mu.Lock()
	delete(l.holds, h)
	l.mu.Unlock()
}

// Take admits a call that ends the hold h (a settlement, a release), so that exactly one of
// those calls and Close ends it. While the form is open and keeps h it runs check (nil: none),
// under the lock, where it may read the binding, and unless check refuses, forgets h and admits
// the call, which Leave ends. It reports whether the form kept h, and returns the closed error
// on a form that is not open, or check's refusal, which leaves h kept and the call not
// admitted. It allocates nothing but what check does.
func (l *Life[H]) Take(h H, check func() error) (kept bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return false, l.closed
	}
	if _, kept = l.holds[h]; !kept {
		return false, nil
	}
	if check != nil {
		if err := check(); err != nil {
			return true, err
		}
	}
	delete(l.holds, h)
	l.busy.Add(1)
	return true, nil
}

// Close closes an open form: later calls get the closed error and later claims keep nothing.
// It runs giveBack on each hold still kept, waits for the calls in flight, then runs free,
// which frees what the calls used, and returns their errors joined. On a form that is not open
// it does nothing.
func (l *Life[H]) Close(giveBack func(H) error, free func() error) error {
	l.life.Lock()
	defer l.life.Unlock()
	l.mu.Lock()
	if !l.open {
		l.mu.Unlock()
		return nil
	}
	holds := l.holds
	l.open, l.holds = false, nil
	l.mu.Unlock()

	var errs []error
	// Holds first: a call in flight may wait for a pooled connection that only a hold given
	// back frees.
	for h := range holds {
		errs = append(errs, giveBack(h))
	}
	l.busy.Wait()
	errs = append(errs, free())
	return errors.Join(errs...)
}
