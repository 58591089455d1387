package formlife

import (
	"errors"
	"sync"
	"testing"
	"time"
)

type hold struct{ id int }

var (
	errClosed  = errors.New("closed")
	errAlready = errors.New("already open")
)

func opened(t *testing.T) *Life[*hold] {
	t.Helper()
	l := New[*hold](errClosed)
	if err := l.Open(func() error { return errAlready }, func() error { return nil }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func noGiveBack(*hold) error { return nil }
func noFree() error          { return nil }

func TestCallsOnlyWhileOpen(t *testing.T) {
	l := New[*hold](errClosed)
	if err := l.Enter(); err != errClosed {
		t.Fatalf("Enter before Open: %v, want the closed error", err)
	}
	if l.Keep(&hold{}) {
		t.Fatal("Keep before Open kept the hold")
	}
	failed := errors.New("bind failed")
	if err := l.Open(nil, func() error { return failed }); err != failed {
		t.Fatalf("Open whose bind fails: %v, want bind's error", err)
	}
	if err := l.Enter(); err != errClosed {
		t.Fatalf("Enter after a failed Open: %v, want the closed error", err)
	}

	if err := l.Open(nil, func() error { return nil }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := l.Open(func() error { return errAlready }, func() error { t.Error("bind ran on an open form"); return nil }); err != errAlready {
		t.Fatalf("Open on an open form: %v, want already's error", err)
	}
	if err := l.Enter(); err != nil {
		t.Fatalf("Enter while open: %v", err)
	}
	l.Leave()

	if err := l.Close(noGiveBack, noFree); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Enter(); err != errClosed {
		t.Fatalf("Enter after Close: %v, want the closed error", err)
	}
	if kept, err := l.Take(&hold{}, nil); kept || err != errClosed {
		t.Fatalf("Take after Close: %v, %v; want false and the closed error", kept, err)
	}
	if err := l.Close(func(*hold) error { t.Error("a second Close gave back a hold"); return nil }, func() error { t.Error("a second Close freed"); return nil }); err != nil {
		t.Fatalf("a second Close: %v", err)
	}

	// Opened again, with no holds of the last binding.
	if err := l.Open(nil, func() error { return nil }); err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := l.Enter(); err != nil {
		t.Fatalf("Enter after reopening: %v", err)
	}
	l.Leave()
}

func TestHoldsEndOnce(t *testing.T) {
	l := opened(t)
	settled, refused, left := &hold{1}, &hold{2}, &hold{3}
	if !l.Keep(settled, refused) || !l.Keep(left) {
		t.Fatal("Keep on an open form refused")
	}
	if kept, err := l.Take(settled, nil); !kept || err != nil {
		t.Fatalf("Take of a kept hold: %v, %v", kept, err)
	}
	l.Leave()
	if kept, err := l.Take(settled, nil); kept || err != nil {
		t.Fatalf("Take of a hold taken before: %v, %v; want false, nil", kept, err)
	}
	if l.Kept(settled) {
		t.Fatal("a hold taken is still kept")
	}
	no := errors.New("a batch's")
	if kept, err := l.Take(refused, func() error { return no }); !kept || err != no {
		t.Fatalf("Take that check refuses: %v, %v; want true and check's error", kept, err)
	}
	if !l.Kept(refused) {
		t.Fatal("a hold check refused is no longer kept")
	}

	var given []*hold
	freed := errors.New("free")
	err := l.Close(func(h *hold) error {
		given = append(given, h)
		return errors.New("giving back")
	}, func() error { return freed })
	if len(given) != 2 || given[0] == settled || given[1] == settled {
		t.Errorf("Close gave back %v, want the two holds not taken", given)
	}
	if !errors.Is(err, freed) || err.Error() != "giving back\ngiving back\nfree" {
		t.Errorf("Close: %q, want give-back and free errors joined", err)
	}
	if l.Kept(refused) || l.Keep(&hold{}) {
		t.Error("a closed form keeps holds")
	}
}

// TestCloseWaitsForCalls: Close gives back the holds at once, then waits for the calls in flight
// and the goroutines they started before it frees.
func TestCloseWaitsForCalls(t *testing.T) {
	l := opened(t)
	h := &hold{}
	l.Keep(h)
	if err := l.Enter(); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	l.Go(func() { <-release })

	var mu sync.Mutex
	var steps []string
	step := func(s string) {
		mu.Lock()
		steps = append(steps, s)
		mu.Unlock()
	}
	closed := make(chan error)
	go func() {
		closed <- l.Close(func(*hold) error { step("give back"); return nil }, func() error { step("free"); return nil })
	}()
	time.Sleep(20 * time.Millisecond)
	step("call leaves")
	l.Leave()
	time.Sleep(20 * time.Millisecond)
	step("goroutine ends")
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	want := []string{"give back", "call leaves", "goroutine ends", "free"}
	if len(steps) != len(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("steps %v, want %v", steps, want)
		}
	}
}

// TestConcurrentCloses: calls racing Close are admitted whole or refused, under the race detector.
func TestConcurrentCloses(t *testing.T) {
	l := New[*hold](errClosed)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h := &hold{}
				if err := l.Enter(); err != nil {
					continue
				}
				if l.Keep(h) {
					if kept, err := l.Take(h, nil); kept && err == nil {
						l.Leave()
					}
				}
				l.Leave()
			}
		}()
	}
	for range 100 {
		l.Open(func() error { return errAlready }, func() error { return nil })
		l.Close(noGiveBack, noFree)
	}
	close(stop)
	wg.Wait()
}

func TestNoAllocationPerCall(t *testing.T) {
	l := opened(t)
	h := &hold{}
	no := errors.New("refused")
	batch := false
	allocs := testing.AllocsPerRun(100, func() {
		if l.Enter() != nil {
			t.Fatal("not open")
		}
		l.Keep(h)
		if _, err := l.Take(h, func() error {
			if batch {
				return no
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		l.Leave()
		l.Leave()
	})
	if allocs != 0 {
		t.Errorf("a call allocates %v times, want none", allocs)
	}
}

// TestForgottenHoldsAreNotGivenBack: a hold a call ended under its own lock and forgot is not
// given back at Close; one still kept is.
func TestForgottenHoldsAreNotGivenBack(t *testing.T) {
	l := opened(t)
	ended, kept := &hold{id: 1}, &hold{id: 2}
	if !l.Keep(ended, kept) {
		t.Fatal("Keep on an open form kept nothing")
	}
	l.Forget(ended)
	if l.Kept(ended) || !l.Kept(kept) {
		t.Fatalf("after Forget: kept %v and %v, want only the second", l.Kept(ended), l.Kept(kept))
	}
	var given []int
	if err := l.Close(func(h *hold) error { given = append(given, h.id); return nil }, noFree); err != nil {
		t.Fatal(err)
	}
	if len(given) != 1 || given[0] != 2 {
		t.Fatalf("Close gave back %v, want [2]", given)
	}
	l.Forget(kept) // after Close: nothing to forget, and no panic
}
