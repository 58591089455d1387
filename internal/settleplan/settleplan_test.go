package settleplan

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

var (
	boom, bust = errors.New("boom"), errors.New("bust")
	// kinds are the outcomes a unit's rows may have, two of each that stamps, so that steps are
	// seen shared and split.
	kinds = []outcome.Outcome{
		{}, outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.Retry().WithError(boom),
		outcome.RetryAfter(time.Second), outcome.RetryAfter(time.Second).WithError(boom),
		outcome.RetryAfter(time.Minute), outcome.Fail(boom), outcome.Fail(bust),
	}
	full = Table{DeadAt: true, RetryAfter: true, LastError: true, RetryWrites: true}
)

func TestOfExamples(t *testing.T) {
	for _, tt := range []struct {
		name string
		t    Table
		os   []outcome.Outcome
		back bool
		want Plan
	}{
		{"nothing", full, nil, false, Plan{}},
		{"acks and drops share a step", full, []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Ack()}, false,
			Plan{Steps: []Step{{Kind: outcome.KindAck, Rows: []int{0, 1, 2}}}}},
		{"the ack and the retry lead, stamps follow in the order first met", full,
			[]outcome.Outcome{outcome.Fail(boom), outcome.RetryAfter(time.Minute), outcome.Retry(), outcome.Ack(), outcome.Fail(boom)}, false,
			Plan{Steps: []Step{
				{Kind: outcome.KindAck, Rows: []int{3}},
				{Kind: outcome.KindRetry, Rows: []int{2}},
				{Kind: outcome.KindFail, LastError: "boom", Rows: []int{0, 4}},
				{Kind: outcome.KindRetryAfter, Delay: time.Minute, Rows: []int{1}},
			}}},
		{"a stamp splits by last error", full,
			[]outcome.Outcome{outcome.Fail(boom), outcome.Fail(bust)}, false,
			Plan{Steps: []Step{
				{Kind: outcome.KindFail, LastError: "boom", Rows: []int{0}},
				{Kind: outcome.KindFail, LastError: "bust", Rows: []int{1}},
			}}},
		{"without last_error, stamps of one delay share a step", Table{DeadAt: true, RetryAfter: true, RetryWrites: true},
			[]outcome.Outcome{outcome.Fail(boom), outcome.Fail(bust), outcome.RetryAfter(time.Second).WithError(boom), outcome.RetryAfter(time.Second)}, false,
			Plan{Steps: []Step{
				{Kind: outcome.KindFail, Rows: []int{0, 1}},
				{Kind: outcome.KindRetryAfter, Delay: time.Second, Rows: []int{2, 3}},
			}}},
		{"cancels share a stamp of cancelled_at, whatever their reason, after the ack", Table{CancelledAt: true, LastError: true},
			[]outcome.Outcome{outcome.Cancel(), outcome.Ack(), outcome.Cancel().WithError(boom)}, false,
			Plan{Steps: []Step{
				{Kind: outcome.KindAck, Rows: []int{1}},
				{Kind: outcome.KindCancel, Rows: []int{0, 2}},
			}}},
		{"without cancelled_at a cancel is dropped", full,
			[]outcome.Outcome{outcome.Cancel(), outcome.Ack()}, false,
			Plan{Steps: []Step{{Kind: outcome.KindAck, Rows: []int{0, 1}}}}},
		{"without dead_at a dying row is dropped", Table{RetryAfter: true, LastError: true},
			[]outcome.Outcome{outcome.Fail(boom), outcome.Ack()}, false,
			Plan{Steps: []Step{{Kind: outcome.KindAck, Rows: []int{0, 1}}}}},
		{"without retry_after a delay is a retry at once, and said", Table{DeadAt: true, RetryWrites: true},
			[]outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Hour), outcome.Retry()}, false,
			Plan{Steps: []Step{{Kind: outcome.KindAck, Rows: []int{0}}, {Kind: outcome.KindRetry, Rows: []int{1, 2}}}, Unscheduled: []int{1}}},
		{"a retry that writes nothing has no step", Table{DeadAt: true, RetryAfter: true},
			[]outcome.Outcome{outcome.Retry(), {}, outcome.Ack()}, false,
			Plan{Steps: []Step{{Kind: outcome.KindAck, Rows: []int{2}}}}},
		{"writes rolled back: an ack is a retry, the rest as they are", full,
			[]outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.RetryAfter(time.Second)}, true,
			Plan{Steps: []Step{
				{Kind: outcome.KindAck, Rows: []int{1}},
				{Kind: outcome.KindRetry, Rows: []int{0}},
				{Kind: outcome.KindRetryAfter, Delay: time.Second, Rows: []int{2}},
			}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.t, tt.os, tt.back); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Of(%+v, %v, %v)\n got %+v\nwant %+v", tt.t, tt.os, tt.back, got, tt.want)
			}
		})
	}
}

// TestOfEveryMix plans every unit of up to three rows of every outcome, on every table shape,
// with and without the writes rolled back, and checks each plan against what each row alone
// must become.
func TestOfEveryMix(t *testing.T) {
	var units [][]outcome.Outcome
	for _, a := range kinds {
		units = append(units, []outcome.Outcome{a})
		for _, b := range kinds {
			units = append(units, []outcome.Outcome{a, b})
			for _, c := range kinds {
				units = append(units, []outcome.Outcome{a, b, c})
			}
		}
	}
	n := 0
	for shape := range 16 {
		tbl := Table{DeadAt: shape&1 != 0, RetryAfter: shape&2 != 0, LastError: shape&4 != 0, RetryWrites: shape&8 != 0}
		for _, back := range []bool{false, true} {
			for _, os := range units {
				checkPlan(t, tbl, os, back, Of(tbl, os, back))
				n++
			}
		}
	}
	t.Logf("%d plans checked", n)
}

// want is the step row o must settle by on t, said plainly, and whether it has one.
func want(t Table, o outcome.Outcome, back bool) (Step, bool) {
	var lastError any
	if t.LastError {
		lastError = o.LastError()
	}
	retry := Step{Kind: outcome.KindRetry}
	switch o.Kind() {
	case outcome.KindAck:
		if back {
			return retry, t.RetryWrites
		}
		return Step{Kind: outcome.KindAck}, true
	case outcome.KindDrop:
		return Step{Kind: outcome.KindAck}, true
	case outcome.KindFail:
		if !t.DeadAt {
			return Step{Kind: outcome.KindAck}, true
		}
		return Step{Kind: outcome.KindFail, LastError: lastError}, true
	case outcome.KindRetryAfter:
		if t.RetryAfter {
			return Step{Kind: outcome.KindRetryAfter, Delay: o.Delay(), LastError: lastError}, true
		}
	}
	return retry, t.RetryWrites
}

func checkPlan(t *testing.T, tbl Table, os []outcome.Outcome, back bool, p Plan) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("Of(%+v, %v, writes rolled back %v) = %+v: "+format, append([]any{tbl, os, back, p}, args...)...)
	}
	seen := map[int]bool{}
	for si, s := range p.Steps {
		if len(s.Rows) == 0 || !slices.IsSorted(s.Rows) {
			fail("step %d names rows %v: want some, in order", si, s.Rows)
		}
		for _, i := range s.Rows {
			if seen[i] {
				fail("row %d in two steps", i)
			}
			seen[i] = true
			w, ok := want(tbl, os[i], back)
			if !ok {
				fail("row %d (%v) has a step, and needs none", i, os[i])
			}
			if w.Kind != s.Kind || w.Delay != s.Delay || w.LastError != s.LastError {
				fail("row %d (%v) settles in step %d as %v/%v/%v, want %v/%v/%v", i, os[i], si, s.Kind, s.Delay, s.LastError, w.Kind, w.Delay, w.LastError)
			}
		}
		for sj, q := range p.Steps[:si] {
			if q.Kind == s.Kind && q.Delay == s.Delay && q.LastError == s.LastError {
				fail("steps %d and %d settle alike: they must be one", sj, si)
			}
		}
	}
	var unscheduled []int
	for i, o := range os {
		if _, ok := want(tbl, o, back); ok != seen[i] {
			fail("row %d (%v): in a step %v, want %v", i, o, seen[i], ok)
		}
		if o.Kind() == outcome.KindRetryAfter && !tbl.RetryAfter {
			unscheduled = append(unscheduled, i)
		}
	}
	if !slices.Equal(p.Unscheduled, unscheduled) {
		fail("unscheduled %v, want %v", p.Unscheduled, unscheduled)
	}
	rank := func(s Step) int {
		switch s.Kind {
		case outcome.KindAck:
			return 0
		case outcome.KindRetry:
			return 1
		}
		return 2
	}
	for si := 1; si < len(p.Steps); si++ {
		a, b := p.Steps[si-1], p.Steps[si]
		if rank(a) > rank(b) || rank(a) == 2 && rank(b) == 2 && a.Rows[0] > b.Rows[0] {
			fail("steps %d and %d out of order: the ack, the retry, then stamps by their first row", si-1, si)
		}
	}
}

func TestOneAgreesWithOf(t *testing.T) {
	for shape := range 16 {
		tbl := Table{DeadAt: shape&1 != 0, RetryAfter: shape&2 != 0, LastError: shape&4 != 0, RetryWrites: shape&8 != 0}
		for _, back := range []bool{false, true} {
			for _, o := range kinds {
				s, ok := One(tbl, o, back)
				p := Of(tbl, []outcome.Outcome{o}, back)
				if !ok {
					if len(p.Steps) != 0 {
						t.Errorf("One(%+v, %v, %v) has no step, Of has %+v", tbl, o, back, p.Steps)
					}
					continue
				}
				s.Rows = []int{0}
				if len(p.Steps) != 1 || !reflect.DeepEqual(p.Steps[0], s) {
					t.Errorf("One(%+v, %v, %v) = %+v, Of = %+v", tbl, o, back, s, p.Steps)
				}
			}
		}
	}
}

// TestOneAllocatesNothing: a row that settles, or retries, costs the plan no allocation (a
// stamp's last error is boxed once, as the statement's argument would be).
func TestOneAllocatesNothing(t *testing.T) {
	for _, o := range []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry().WithError(boom), outcome.RetryAfter(time.Second)} {
		if n := testing.AllocsPerRun(100, func() { One(full, o, false) }); n != 0 {
			t.Errorf("One(%v) allocates %v times, want 0", o, n)
		}
	}
}

func TestValues(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(t time.Time) any { return t.Format(time.RFC3339) }
	for _, tt := range []struct {
		t    Table
		s    Step
		want sqltext.Values
	}{
		{Table{}, Step{Kind: outcome.KindAck}, sqltext.Values{}},
		{Table{ProcessedAt: true}, Step{Kind: outcome.KindAck}, sqltext.Values{At: "2026-12-02T12:00:00Z"}},
		{full, Step{Kind: outcome.KindRetry}, sqltext.Values{}},
		{full, Step{Kind: outcome.KindRetryAfter, Delay: time.Minute, LastError: "boom"}, sqltext.Values{At: "2026-12-02T12:01:00Z", Error: "boom"}},
		{full, Step{Kind: outcome.KindFail, LastError: nil}, sqltext.Values{At: "2026-12-02T12:00:00Z"}},
		// Without a last_error column the stamp binds no error, whatever the step carries.
		{Table{DeadAt: true}, Step{Kind: outcome.KindFail, LastError: "boom"}, sqltext.Values{At: "2026-12-02T12:00:00Z"}},
		// A cancel stamps now, and no last error.
		{Table{CancelledAt: true, LastError: true}, Step{Kind: outcome.KindCancel}, sqltext.Values{At: "2026-12-02T12:00:00Z"}},
	} {
		if got := tt.t.Values(tt.s, now, at); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%+v.Values(%+v) = %+v, want %+v", tt.t, tt.s, got, tt.want)
		}
	}
}
