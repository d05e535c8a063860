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
		// pgconn's own URL parser takes several hosts; net/url does not.
		{"postgres://u@h1:5432,h2/db?connect_timeout=5", true},
		{"postgres://u@[::1]:5432,[::2]:5433/db?sslmode=disable&connect_timeout=5", true},
		{"postgres://u@h/db", false},
		// A pair net/url cannot read is skipped, the others kept.
		{"postgres://u@h/db?application_name=a;b&connect_timeout=0", true},
		// Bytes of a multi-byte character are not spaces.
		{"password=\u00e0b connect_timeout=5", true},
		{"password=\u0085b connect_timeout=5", true},
		{"application_name=x\u00a0connect_timeout=5", false},
	} {
		if got := dsnSets(tc.dsn, "connect_timeout"); got != tc.want {
			t.Errorf("dsnSets(%q, connect_timeout) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}
