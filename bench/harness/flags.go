package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Ints reads flag -name's comma-separated positive integers, each once, in ascending order.
func Ints(name, value string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(value, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-%s %q: want positive integers, comma-separated", name, value)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Names reads flag -name's comma-separated names, each once, in the order given, and refuses a
// name not among known.
func Names(name, value string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(value, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("-%s: unknown %q: want some of %s", name, f, strings.Join(known, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}
