package pgkv

import "testing"

// TestDSNSets: a setting counts when the DSN names it as a key, not when
// its name appears in a value or a longer key.
func TestDSNSets(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"postgres://u@h/db?connect_timeout=5", true},
		{"postgresql://u@h/db?sslmode=disable&connect_timeout=0", true},
		{"postgres://u@h/db?application_name=connect_timeout_probe", false},
		{"postgres://u@h/connect_timeout", false},
		{"host=h connect_timeout=5", true},
		{"host=h connect_timeout = 5 dbname=d", true},
		{"connect_timeout=0", true},
		{"host=h application_name=connect_timeout_probe", false},
		{"host=h application_name='a connect_timeout=1 b' dbname=d", false},
		{`password='it\'s' connect_timeout=2`, true},
		{`password=a\ connect_timeout=3`, false},
		{"host=h my_connect_timeout=5", false},
		{"", false},
	} {
		if got := dsnSets(tc.dsn, "connect_timeout"); got != tc.want {
			t.Errorf("dsnSets(%q, connect_timeout) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}
