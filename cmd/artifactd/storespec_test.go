package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStoreSpec(t *testing.T) {
	for _, tc := range []struct {
		in      string
		dir     string
		dsn     string
		wantErr string
	}{
		{in: "./artifactd-data", dir: "./artifactd-data"},
		{in: "/var/lib/artifactd", dir: "/var/lib/artifactd"},
		{in: "badger:/srv/a", dir: "/srv/a"},
		{in: "badger:rel/dir", dir: "rel/dir"},
		{in: "odd:name", dir: "odd:name"}, // a directory may hold a colon
		{in: "./a://b", dir: "./a://b"},   // a path with a slash before :// is a path
		{in: "postgres://u@127.0.0.1:5432/db?sslmode=disable", dsn: "postgres://u@127.0.0.1:5432/db?sslmode=disable"},
		{in: "postgresql://u:pw@db.example/artifactd", dsn: "postgresql://u:pw@db.example/artifactd"},
		{in: "postgres:///db?host=/run/postgresql", dsn: "postgres:///db?host=/run/postgresql"},
		{in: "", wantErr: "empty: expected badger:DIR"},
		{in: "badger:", wantErr: "needs a directory"},
		{in: "mysql://u@h/db", wantErr: `unknown store scheme "mysql"`},
		{in: "sqlite://x", wantErr: `unknown store scheme "sqlite"`},
		{in: "postgres:///db", wantErr: "names no host"},
		{in: "postgres://u@h:notaport/db", wantErr: "not a PostgreSQL URL"},
	} {
		sp, err := parseStoreSpec(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseStoreSpec(%q) = %+v, %v; want an error containing %q", tc.in, sp, err, tc.wantErr)
			}
			continue
		}
		if err != nil || sp.Dir != tc.dir || sp.DSN != tc.dsn {
			t.Errorf("parseStoreSpec(%q) = %+v, %v; want dir %q dsn %q", tc.in, sp, err, tc.dir, tc.dsn)
		}
	}
}

func TestStoreSpecStringHidesPassword(t *testing.T) {
	sp := storeSpec{DSN: "postgres://app:s3cret@db.example:5432/artifactd"}
	if s := sp.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "db.example") {
		t.Errorf("String() = %q", s)
	}
	if f := sp.flag(); strings.Contains(f, "s3cret") || !strings.HasPrefix(f, "--store ") {
		t.Errorf("flag() = %q", f)
	}
	if f := (storeSpec{Dir: "d"}).flag(); f != "--data d" {
		t.Errorf("flag() = %q", f)
	}
}

// TestStoreFlagsResolve: --store, an explicit --data, $ARTIFACTD_STORE and
// --data's default, in that order; both flags, or a bad value, is an
// error naming the flag or variable.
func TestStoreFlagsResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     string
		want    storeSpec
		wantErr string
	}{
		{name: "default", want: storeSpec{Dir: defaultDataDir}},
		{name: "data", args: []string{"--data", "d"}, want: storeSpec{Dir: "d"}},
		{name: "store dir", args: []string{"--store", "badger:d"}, want: storeSpec{Dir: "d"}},
		{name: "store pg", args: []string{"--store", "postgres://u@h/db"}, want: storeSpec{DSN: "postgres://u@h/db"}},
		{name: "env", env: "postgres://u@h/db", want: storeSpec{DSN: "postgres://u@h/db"}},
		{name: "data over env", args: []string{"--data", "d"}, env: "postgres://u@h/db", want: storeSpec{Dir: "d"}},
		{name: "store over env", args: []string{"--store", "e"}, env: "postgres://u@h/db", want: storeSpec{Dir: "e"}},
		{name: "both", args: []string{"--store", "a", "--data", "b"}, wantErr: "--store and --data both name a store"},
		{name: "bad store", args: []string{"--store", "mysql://h/db"}, wantErr: "--store: unknown store scheme"},
		{name: "bad env", env: "mysql://h/db", wantErr: "ARTIFACTD_STORE: unknown store scheme"},
		{name: "empty data", args: []string{"--data", ""}, wantErr: "--data: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envStore, tc.env)
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := addStoreFlags(fs, defaultDataDir, "data directory")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := f.resolve()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("resolve() = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolve() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestStoreFlagOnCommands: every command that opens a store takes
// --store, and a bad one is a usage error naming the flag.
func TestStoreFlagOnCommands(t *testing.T) {
	t.Setenv(envStore, "")
	for _, args := range [][]string{
		{"serve"}, {"fsck"}, {"log", "--context", "x"}, {"export", "--context", "x"},
		{"import", "bundle.jsonl"}, {"replay", "--context", "x"}, {"audit", "--context", "x", "a"},
		{"diff", "--context", "x", "a", "b"}, {"branch", "--context", "x"}, {"merge", "--context", "x", "b"},
		{"eval", "--context", "x"}, {"quarantine", "--context", "x"}, {"demo"},
		{"compare", "--context", "a", "--against", "b"}, {"fetch", "--context", "x", "http://example.com/"},
	} {
		var stdout, stderr bytes.Buffer
		full := append(append([]string(nil), args...), "--store", "mysql://h/db")
		if args[0] == "import" {
			full = []string{"import", "--store", "mysql://h/db", filepath.Join(t.TempDir(), "missing.jsonl")}
		}
		code := Run(context.Background(), full, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), "--store: unknown store scheme") {
			if args[0] == "import" && strings.Contains(stderr.String(), "missing.jsonl") {
				continue // import reads its bundle first
			}
			t.Errorf("%v: exit %d, stderr %q; want %d naming --store", full, code, stderr.String(), exitUsage)
		}
	}
}
