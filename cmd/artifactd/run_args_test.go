package main

import (
	"io"
	"slices"
	"testing"
)

// TestParseInterspersedDoubleDash: flags may come before or after the
// positionals, and everything after a "--" is positional — at the start
// of the line too, where the flag package drops the "--" itself.
func TestParseInterspersedDoubleDash(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		n    string
	}{
		{[]string{"a", "-n", "x", "b"}, []string{"a", "b"}, "x"},
		{[]string{"-n", "x", "a", "--", "-b", "c"}, []string{"a", "-b", "c"}, "x"},
		{[]string{"--", "a", "-b"}, []string{"a", "-b"}, ""},
		{[]string{"--", "-n", "y"}, []string{"-n", "y"}, ""},
		{[]string{"-n", "x", "--", "a", "-n", "z"}, []string{"a", "-n", "z"}, "x"},
	} {
		fs := newFlagSet("t", "", io.Discard)
		n := fs.String("n", "", "")
		pos, err := parseInterspersed(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *n != c.n {
			t.Errorf("%q: positionals %q, -n %q, %v; want %q, %q", c.args, pos, *n, err, c.pos, c.n)
		}
	}
}

// TestParseInterspersedDashDashValue: a "--" that a flag takes as its
// value ("--message --") is the flag's, not the end of the flags: the
// flags after the next positional are still parsed.
func TestParseInterspersedDashDashValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		n, m string
	}{
		{[]string{"-n", "--", "a", "-m", "y"}, []string{"a"}, "--", "y"},
		{[]string{"-v", "-n", "--", "a", "-m", "y"}, []string{"a"}, "--", "y"},
		{[]string{"-n", "-m", "--", "a", "-m", "y"}, []string{"a", "-m", "y"}, "-m", ""},
		{[]string{"-n=x", "--", "a", "-m", "y"}, []string{"a", "-m", "y"}, "x", ""},
	} {
		fs := newFlagSet("t", "", io.Discard)
		n := fs.String("n", "", "")
		m := fs.String("m", "", "")
		fs.Bool("v", false, "")
		pos, err := parseInterspersed(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *n != c.n || *m != c.m {
			t.Errorf("%q: positionals %q, -n %q, -m %q, %v; want %q, %q, %q", c.args, pos, *n, *m, err, c.pos, c.n, c.m)
		}
	}
}
