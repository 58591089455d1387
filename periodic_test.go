package inbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// scheduleFunc is a Schedule by a func, for the schedules that misbehave.
type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }

// cronLike is a Schedule of another package's shape (robfig/cron's SpecSchedule has this
// method set): a pointer type with a Next method, at each whole minute.
type cronLike struct{}

func (*cronLike) Next(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) }

func message(time.Time) Message { return Message{Payload: []byte("x")} }

// TestPeriodicAddRefuses checks that Add refuses each schedule it cannot run, with an error
// that names the schedule and says what to change, and registers the others.
func TestPeriodicAddRefuses(t *testing.T) {
	var nilCron *cronLike
	for _, tt := range []struct {
		name string
		job  PeriodicJob
		want string // in the error; empty: accepted
	}{
		{"an interval", PeriodicJob{Name: "a", Schedule: Every(time.Second), Message: message}, ""},
		{"a cron-shaped schedule", PeriodicJob{Name: "b", Schedule: &cronLike{}, Message: message, Misfire: MisfireBackfill(1000)}, ""},
		{"no name", PeriodicJob{Schedule: Every(time.Second), Message: message}, "without a Name"},
		{"a name too long", PeriodicJob{Name: strings.Repeat("é", 192), Schedule: Every(time.Second), Message: message}, "has 192 characters"},
		{"a name taken", PeriodicJob{Name: "a", Schedule: Every(time.Minute), Message: message}, "registered already"},
		{"no schedule", PeriodicJob{Name: "c", Message: message}, "Schedule is nil"},
		{"a nil pointer schedule", PeriodicJob{Name: "c", Schedule: nilCron, Message: message}, "Schedule is nil"},
		{"no message", PeriodicJob{Name: "c", Schedule: Every(time.Second)}, "Message func is nil"},
		{"an interval of zero", PeriodicJob{Name: "c", Schedule: Every(0), Message: message}, "which is not later"},
		{"a negative interval", PeriodicJob{Name: "c", Schedule: Every(-time.Second), Message: message}, "which is not later"},
		{"a schedule that goes back", PeriodicJob{Name: "c", Schedule: scheduleFunc(func(t time.Time) time.Time { return t.Add(-time.Hour) }), Message: message}, "which is not later"},
		{"a schedule that never fires", PeriodicJob{Name: "c", Schedule: scheduleFunc(func(time.Time) time.Time { return time.Time{} }), Message: message}, "zero time"},
		{"a schedule that advances less than a microsecond", PeriodicJob{Name: "c", Schedule: scheduleFunc(func(t time.Time) time.Time { return t.Add(time.Nanosecond) }), Message: message}, "which is not later"},
		{"a schedule that stops after one tick", PeriodicJob{Name: "c", Schedule: stopsAfter(time.Now().Add(time.Hour)), Message: message}, "which is not later"},
		{"a negative backfill", PeriodicJob{Name: "c", Schedule: Every(time.Second), Message: message, Misfire: MisfireBackfill(-1)}, "MisfireBackfill(-1)"},
		{"a backfill too large", PeriodicJob{Name: "c", Schedule: Every(time.Second), Message: message, Misfire: MisfireBackfill(1001)}, "between 0 and 1000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPeriodic(nil, nil, Table{Name: "jobs", ID: "id"}, nil)
			if tt.name == "a name taken" {
				if err := p.Add(PeriodicJob{Name: "a", Schedule: Every(time.Second), Message: message}); err != nil {
					t.Fatal(err)
				}
			}
			err := p.Add(tt.job)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Add = %v; want it accepted", err)
			case tt.want == "":
				return
			case err == nil:
				t.Fatalf("Add accepted it; want an error saying %q", tt.want)
			case !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "inbox: table \"jobs\""):
				t.Fatalf("Add = %q; want the table named and %q", err, tt.want)
			}
			if got := len(p.jobs); got != 0 && tt.name != "a name taken" {
				t.Errorf("%d schedules registered after a refusal", got)
			}
		})
	}
}

// stopsAfter ticks once, at end, and then returns end again: it stops advancing.
func stopsAfter(end time.Time) Schedule {
	return scheduleFunc(func(time.Time) time.Time { return end })
}

// TestPeriodicAddAfterRun checks that a Periodic takes no schedule once it runs, and runs once.
func TestPeriodicAddAfterRun(t *testing.T) {
	p := NewPeriodic(nil, nil, Table{Name: "jobs", ID: "id"}, nil)
	p.running = true
	if err := p.Add(PeriodicJob{Name: "a", Schedule: Every(time.Second), Message: message}); err == nil || !strings.Contains(err.Error(), "before Run") {
		t.Errorf("Add after Run = %v; want it refused", err)
	}
	if err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "runs once") {
		t.Errorf("a second Run = %v; want it refused", err)
	}
}

// TestEvery checks the interval's ticks: the multiples of the interval, whenever asked.
func TestEvery(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		from time.Time
		d    time.Duration
		want time.Time
	}{
		{at, time.Second, at.Add(time.Second)},
		{at.Add(300 * time.Millisecond), time.Second, at.Add(time.Second)},
		{at.Add(59 * time.Minute), time.Hour, at.Add(time.Hour)},
		{at.Add(7 * time.Minute), 15 * time.Minute, at.Add(15 * time.Minute)},
	} {
		if got := Every(tt.d).Next(tt.from); !got.Equal(tt.want) {
			t.Errorf("Every(%v).Next(%v) = %v; want %v", tt.d, tt.from, got, tt.want)
		}
	}
}

// TestPlanMisfire checks which ticks a take publishes after an outage, by policy: the missed
// ticks it keeps, and the tick on time (less late than half a period) whatever the policy.
func TestPlanMisfire(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	secs := func(ss ...float64) []time.Time {
		out := []time.Time{}
		for _, s := range ss {
			out = append(out, sec(s))
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		misfire Misfire
		first   time.Time // the first tick not taken
		now     time.Time
		want    []time.Time
		latest  time.Time // zero: nothing due
	}{
		{"not due yet", MisfireSkip, sec(1), sec(0.5), nil, time.Time{}},
		{"on time", MisfireSkip, sec(1), sec(1.2), secs(1), sec(1)},
		{"late, skipped", MisfireSkip, sec(1), sec(1.7), secs(), sec(1)},
		{"late, run once", MisfireRunOnce, sec(1), sec(1.7), secs(1), sec(1)},
		{"an outage, skipped", MisfireSkip, sec(1), sec(10.7), secs(), sec(10)},
		{"an outage, skipped but for the tick on time", MisfireSkip, sec(1), sec(10.2), secs(10), sec(10)},
		{"an outage, run once", MisfireRunOnce, sec(1), sec(10.7), secs(10), sec(10)},
		{"an outage, run once and the tick on time", MisfireRunOnce, sec(1), sec(10.2), secs(9, 10), sec(10)},
		{"an outage, backfilled 3", MisfireBackfill(3), sec(1), sec(10.7), secs(8, 9, 10), sec(10)},
		{"an outage, backfilled more than missed", MisfireBackfill(50), sec(1), sec(3.7), secs(1, 2, 3), sec(3)},
		{"an outage, backfilled 0", MisfireBackfill(0), sec(1), sec(10.7), secs(), sec(10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &scheduled{PeriodicJob: PeriodicJob{Name: "a", Schedule: Every(time.Second), Misfire: tt.misfire}}
			p, err := s.plan(tt.first, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if !p.latest.Equal(tt.latest) || !slices.EqualFunc(p.enqueue, tt.want, time.Time.Equal) {
				t.Errorf("plan = latest %v, jobs %v; want latest %v, jobs %v", p.latest, p.enqueue, tt.latest, tt.want)
			}
			if want := tt.now.Truncate(time.Second).Add(time.Second); !p.next.Equal(want) {
				t.Errorf("next = %v; want %v", p.next, want)
			}
		})
	}
}

// TestPlanLongOutage checks that a schedule of frequent ticks down for a long time plans from
// a few ticks before now, rather than walking every tick it missed, and keeps the latest.
func TestPlanLongOutage(t *testing.T) {
	first := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	now := first.Add(3*365*24*time.Hour + 700*time.Millisecond) // 94 million ticks later
	s := &scheduled{PeriodicJob: PeriodicJob{Name: "a", Schedule: Every(time.Second), Misfire: MisfireBackfill(2)}}
	p, err := s.plan(first, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{now.Truncate(time.Second).Add(-time.Second), now.Truncate(time.Second)}
	if !slices.EqualFunc(p.enqueue, want, time.Time.Equal) {
		t.Errorf("jobs %v; want %v", p.enqueue, want)
	}
}

// TestPlanScheduleStops checks that a schedule whose Next stops advancing in the middle of a
// plan fails it with errStopped, which stops the schedule, rather than loop.
func TestPlanScheduleStops(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s := &scheduled{PeriodicJob: PeriodicJob{Name: "a", Schedule: scheduleFunc(func(t time.Time) time.Time {
		if t.Before(t0.Add(3 * time.Second)) {
			return t.Add(time.Second)
		}
		return t0 // back to the start
	})}, where: scheduleWhere("jobs", "a")}
	_, err := s.plan(t0, t0.Add(10*time.Second))
	if !errors.Is(err, errStopped) || !strings.Contains(err.Error(), `schedule "a"`) {
		t.Errorf("plan = %v; want the schedule named and errStopped", err)
	}
}

func TestMisfireString(t *testing.T) {
	for m, want := range map[Misfire]string{MisfireSkip: "MisfireSkip", MisfireRunOnce: "MisfireRunOnce", MisfireBackfill(5): "MisfireBackfill(5)"} {
		if got := m.String(); got != want {
			t.Errorf("%#v.String() = %q; want %q", m, got, want)
		}
	}
}
