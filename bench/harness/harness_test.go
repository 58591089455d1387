package harness

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestMedianAndThousands(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3,1,2 = %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4,1,2,3 = %v", m)
	}
	if m := Median([]float64{0, 5, 0}); m != 5 {
		t.Errorf("median of 0,5,0 = %v, want 5: a round that did not count (0) is left out", m)
	}
	for in, want := range map[float64]string{7: "7", 1234: "1,234", 1234567.4: "1,234,567", 100000: "100,000"} {
		if got := Thousands(in); got != want {
			t.Errorf("Thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestPairedRatio: each round's a over the same round's b, the median of those; a round that
// did not count on either side is left out.
func TestPairedRatio(t *testing.T) {
	// Medians 100 and 100 would read 1.00; the rounds read 0.5, 2 and 1.
	if r := PairedRatio([]float64{100, 200, 50}, []float64{200, 100, 50}); r != 1 {
		t.Errorf("PairedRatio = %v, want 1", r)
	}
	if r := PairedRatio([]float64{90, 0, 80}, []float64{100, 100, 100}); math.Abs(r-0.85) > 1e-9 {
		t.Errorf("PairedRatio with a failed round = %v, want 0.85 (the median of 0.9 and 0.8)", r)
	}
}

// TestRoundsTurnTheOrder: each round starts one drain further along, so that with two drains
// the order alternates and with three no drain always follows the same other; the first error
// stops the rounds.
func TestRoundsTurnTheOrder(t *testing.T) {
	var ran []string
	drain := func(name string) func(int) error {
		return func(r int) error {
			ran = append(ran, name+string(rune('0'+r)))
			return nil
		}
	}
	if err := Rounds(3, drain("L"), drain("R")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ran, " "); got != "L1 R1 R2 L2 L3 R3" {
		t.Errorf("two drains ran %s, want L1 R1 R2 L2 L3 R3", got)
	}
	ran = nil
	if err := Rounds(3, drain("a"), drain("b"), drain("c")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ran, " "); got != "a1 b1 c1 b2 c2 a2 c3 a3 b3" {
		t.Errorf("three drains ran %s, want a1 b1 c1 b2 c2 a2 c3 a3 b3", got)
	}
	ran = nil
	stop := errors.New("stop")
	err := Rounds(3, drain("a"), func(int) error { return stop }, drain("c"))
	if !errors.Is(err, stop) || !slices.Equal(ran, []string{"a1"}) {
		t.Errorf("Rounds after an error: %v, ran %v; want the error after a1 alone", err, ran)
	}
}

func TestFlagLists(t *testing.T) {
	if got, err := Ints("workers", "8,1,4,4"); err != nil || !slices.Equal(got, []int{1, 4, 8}) {
		t.Errorf("Ints(8,1,4,4) = %v, %v; want [1 4 8]", got, err)
	}
	for _, bad := range []string{"0", "1,x", ""} {
		if _, err := Ints("workers", bad); err == nil || !strings.HasPrefix(err.Error(), "-workers ") {
			t.Errorf("Ints(%q) = %v, want an error naming -workers", bad, err)
		}
	}
	if got, err := Names("db", "sqlite, postgres,sqlite", Databases); err != nil || !slices.Equal(got, []string{"sqlite", "postgres"}) {
		t.Errorf("Names = %v, %v; want [sqlite postgres]", got, err)
	}
	if _, err := Names("db", "postgres,oracle", Databases); err == nil || !strings.Contains(err.Error(), `-db: unknown "oracle"`) {
		t.Errorf("Names(postgres,oracle) = %v, want an error naming -db and oracle", err)
	}
}

func TestSeqReadsPayload(t *testing.T) {
	for _, seq := range []int{1, 42, 1000000} {
		if got := Seq(Payload(seq)); got != seq {
			t.Errorf("Seq(Payload(%d)) = %d", seq, got)
		}
	}
	if got := Seq([]byte(`{"other":1}`)); got != 0 {
		t.Errorf("Seq of a payload without seq = %d, want 0", got)
	}
}
