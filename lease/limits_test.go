package lease

import (
	"slices"
	"testing"
)

// TestCandidatesSpread: a row tries the free slot that names it first, then the free slots below
// the limit from its id mod the limit on, wrapping round, and never a held slot or one at or
// above the limit; rows of consecutive ids try different slots first.
func TestCandidatesSpread(t *testing.T) {
	slots := []slotSeen{{slot: 0, holder: 7}, {slot: 1, holder: 3, held: true}, {slot: 2, holder: 9}, {slot: 3, holder: 12}, {slot: 4, holder: 5}, {slot: 5, holder: 6}}
	numbers := func(ss []slotSeen) []int {
		var ns []int
		for _, s := range ss {
			ns = append(ns, s.slot)
		}
		return ns
	}
	cases := []struct {
		id   int64
		want []int
	}{
		{id: 8, want: []int{3, 4, 0, 2}},  // 8 mod 5 = 3; 5 is at the limit, 1 held
		{id: 12, want: []int{3, 2, 4, 0}}, // its own slot first, then from 12 mod 5 = 2 on
		{id: 10, want: []int{0, 2, 3, 4}},
		{id: 11, want: []int{2, 3, 4, 0}}, // 11 mod 5 = 1, held: the next free
		{id: 14, want: []int{4, 0, 2, 3}},
	}
	for _, c := range cases {
		if got := numbers(candidates(slots, c.id, 5)); !slices.Equal(got, c.want) {
			t.Errorf("id %d: candidates %v, want %v", c.id, got, c.want)
		}
	}
	firsts := map[int]bool{}
	free := []slotSeen{{slot: 0}, {slot: 1}, {slot: 2}, {slot: 3}}
	for id := int64(100); id < 104; id++ {
		firsts[candidates(free, id, 4)[0].slot] = true
	}
	if len(firsts) != 4 {
		t.Errorf("rows 100 to 103 try slots %v first, want four different ones", firsts)
	}
}
