package cluster

import "testing"

func TestSourceSubjects(t *testing.T) {
	for _, tc := range []struct {
		subj  string
		have  []string
		valid bool
		want  bool
	}{
		{"shop.orders.eu.>", []string{"shop.orders.>"}, true, true},
		{"shop.orders.*", []string{"shop.orders.>"}, true, true},
		{"shop.orders.eu", []string{"shop.orders.*"}, true, true},
		{"shop.orders.*", []string{"shop.orders.eu"}, true, false},
		{"shop.orders.>", []string{"shop.orders.*"}, true, false},
		{"shop.returns.>", []string{"shop.orders.>"}, true, false},
		{"shop.>", []string{"shop.orders.>", "shop.returns.>"}, true, false},
		{"a.b", []string{"a.b.c"}, true, false},
		{"a.b.c", []string{"a.b"}, true, false},
		{"a.*.c", []string{"a.*.*", "x"}, true, true},
		{"a.>.b", nil, false, false},
		{"a..b", nil, false, false},
		{"a.b*", nil, false, false},
		{"a b", nil, false, false},
		{"", nil, false, false},
	} {
		if err := validSubject(tc.subj); (err == nil) != tc.valid {
			t.Errorf("validSubject(%q) = %v, want valid %v", tc.subj, err, tc.valid)
		}
		if tc.valid {
			if got := coveredBy(tc.subj, tc.have); got != tc.want {
				t.Errorf("coveredBy(%q, %v) = %v, want %v", tc.subj, tc.have, got, tc.want)
			}
		}
	}
}
