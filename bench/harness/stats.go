package harness

import (
	"fmt"
	"slices"
	"strings"
)

// Median is the median of the counted rounds (a round whose drain check failed is 0 and left
// out); 0 when none counted.
func Median(v []float64) float64 {
	s := Counted(v)
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PairedRatio is the median over rounds of a[i]/b[i], each round's drain of a divided by the
// drain of b in the same round: on a noisy machine the pair shares the noise, where a ratio of
// the two medians would not. Rounds either side did not count are left out.
func PairedRatio(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return Median(r)
}

// Counted leaves out the rounds that did not count (0).
func Counted(v []float64) []float64 {
	var s []float64
	for _, x := range v {
		if x > 0 {
			s = append(s, x)
		}
	}
	return s
}

// Spread formats rates as "median (min–max)", of the counted rounds; "–" when none counted.
func Spread(v []float64) string {
	v = Counted(v)
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", Thousands(Median(v)), Thousands(slices.Min(v)), Thousands(slices.Max(v)))
}

// Thousands formats a rate as a whole number with thousands separators.
func Thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
