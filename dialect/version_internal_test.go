package dialect

import "testing"

func TestAtLeast(t *testing.T) {
	tests := []struct {
		version             string
		major, minor, patch int
		want                bool
	}{
		{"8.0.1", 8, 0, 1, true},
		{"8.0.0", 8, 0, 1, false},
		{"8.0.36", 8, 0, 1, true},
		{"8.0.36-0ubuntu0.22.04.1", 8, 0, 1, true},
		{"8.4", 8, 0, 1, true}, // a missing patch reads 0
		{"8", 8, 0, 1, false},  // 8.0.0
		{"9.0.1-log", 8, 0, 1, true},
		{"5.7.44", 8, 0, 1, false},
		{"10.11.14-MariaDB-0+deb12u2", 10, 6, 0, true},
		{"10.6.0-MariaDB", 10, 6, 0, true},
		{"10.5.99-MariaDB", 10, 6, 0, false},
		{"11.0.0-MariaDB", 10, 6, 0, true},
		{"3.35.0", 3, 35, 0, true},
		{"3.34.9", 3, 35, 0, false},
		{"3.46.1", 3, 35, 0, true},
		{"", 3, 35, 0, false},
		{"garbage", 3, 35, 0, false},
	}
	for _, tt := range tests {
		if got := atLeast(tt.version, tt.major, tt.minor, tt.patch); got != tt.want {
			t.Errorf("atLeast(%q, %d, %d, %d) = %v, want %v", tt.version, tt.major, tt.minor, tt.patch, got, tt.want)
		}
	}
}
