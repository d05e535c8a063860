package httpapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestFuzzSeedCorpora checks that the seed corpora of FuzzCommitDecode and
// FuzzHandlers are committed under testdata/fuzz (UPDATE_FUZZ_SEEDS=1
// writes them from commitSeeds and the route table), so that a plain `go
// test` runs every seed and `go test -fuzz` starts from them.
func TestFuzzSeedCorpora(t *testing.T) {
	files := map[string]string{}
	for i, s := range commitSeeds {
		files[filepath.Join("FuzzCommitDecode", fmt.Sprintf("seed-%02d", i))] = "go test fuzz v1\nstring(" + strconv.Quote(s) + ")\n"
		for r := range fuzzRoutes {
			if r != 1 && r != i%len(fuzzRoutes) {
				continue
			}
			files[filepath.Join("FuzzHandlers", fmt.Sprintf("route-%02d-seed-%02d", r, i))] = fmt.Sprintf("go test fuzz v1\nbyte(%q)\nbyte(%q)\nstring(%s)\n", byte(r), byte(i%len(fuzzContentTypes)), strconv.Quote(s))
		}
	}
	for path, body := range files {
		p := filepath.Join("testdata", "fuzz", path)
		if os.Getenv("UPDATE_FUZZ_SEEDS") != "" {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != body {
			t.Errorf("%s is not the committed seed (UPDATE_FUZZ_SEEDS=1 go test ./httpapi -run FuzzSeedCorpora): %v", p, err)
		}
	}
}
