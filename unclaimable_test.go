package inbox

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// findingForm is a fake form whose searches for unclaimable rows answer from a script, the last
// answer repeating, and which notes a search still running when the form is closed.
type findingForm struct {
	*fakeForm

	mu        sync.Mutex
	script    []finding
	searches  int
	searching bool
	late      bool // a search ran into Close
}

type finding struct {
	found []Unclaimable
	err   error
}

func (f *findingForm) Open(ctx context.Context, db *sql.DB, q Binding) (Plan, error) {
	plan, err := f.fakeForm.Open(ctx, db, q)
	plan.FindUnclaimable = f.find
	return plan, err
}

func (f *findingForm) find(ctx context.Context) ([]Unclaimable, error) {
	f.mu.Lock()
	f.searching = true
	next := f.script[min(f.searches, len(f.script)-1)]
	f.searches++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.searching = false
		f.mu.Unlock()
	}()
	return next.found, next.err
}

func (f *findingForm) Close() error {
	f.mu.Lock()
	f.late = f.late || f.searching
	f.mu.Unlock()
	return f.fakeForm.Close()
}

func (f *findingForm) searched() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.searches
}

// TestUnclaimableRowsAreLoggedOnceUntilTheyChange: the consumer searches at Run's start and
// then every unclaimableEvery; it logs a kind of unclaimable row when it first finds it and
// again only when its count changes, says at info when a kind is gone, keeps what it reported
// across a search that failed, and has stopped searching when it closes the form.
func TestUnclaimableRowsAreLoggedOnceUntilTheyChange(t *testing.T) {
	defer func(every time.Duration) { unclaimableEvery = every }(unclaimableEvery)
	unclaimableEvery = time.Millisecond
	nullGroup := func(n int) Unclaimable { return Unclaimable{Why: "null group", Rows: n, IDs: []int64{7}} }
	never := Unclaimable{Why: "never due", Rows: 1, IDs: []int64{9}}
	f := &findingForm{fakeForm: newFakeForm("jobs"), script: []finding{
		{found: []Unclaimable{nullGroup(2)}},
		{found: []Unclaimable{nullGroup(2)}},
		{err: errors.New("connection refused")},
		{found: []Unclaimable{nullGroup(2)}},
		{found: []Unclaimable{nullGroup(3), never}},
		{found: []Unclaimable{never}}, // repeats from here on
	}}
	logs := &logBuffer{}
	c := NewConsumer(noDB(0), f, HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() }), &Config{Logger: logs.logger(), PollInterval: time.Hour})
	if err := runUntil(t, c, func() bool { return f.searched() >= 30 }); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		switch {
		case strings.Contains(line, `msg="inbox: rows of the queue that no claim will take"`):
			got = append(got, line[strings.Index(line, "rows="):])
		case strings.Contains(line, "unclaimable"), strings.Contains(line, "searching"):
			got = append(got, line[strings.Index(line, "msg="):])
		}
	}
	want := []string{
		`rows=2 more=false ids=[7] why="null group"`,
		`msg="inbox: searching the queue for rows no claim will take failed; trying again later" queue="" table=jobs err="connection refused" in=1ms`,
		`rows=3 more=false ids=[7] why="null group"`,
		`rows=1 more=false ids=[9] why="never due"`,
		`msg="inbox: no rows of the queue are unclaimable for this reason any more" queue="" table=jobs why="null group"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after %d searches the consumer logged:\n%s\nwant:\n%s", f.searched(), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f.late {
		t.Error("a search was still running when Run closed the form")
	}
}

// TestFormsWithoutUnclaimableSearchesRunAsBefore: a form whose plan offers no FindUnclaimable is driven
// as ever, and nothing is said of unclaimable rows.
func TestFormsWithoutUnclaimableSearchesRunAsBefore(t *testing.T) {
	f := newFakeForm("jobs", 1, 2)
	logs := &logBuffer{}
	ack := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, ack, &Config{Logger: logs.logger()})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 2 }); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "claim will take") {
		t.Errorf("logged unclaimable rows for a form that cannot search:\n%s", logs)
	}
}
