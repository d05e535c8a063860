package gate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// rewrite regenerates golden files: go test ./gate -run Golden -rewrite.
// Review the diff before committing it.
var rewrite = flag.Bool("rewrite", false, "rewrite the golden files under testdata")

// TestGoldenReceipts keeps the receipt of every shared gate case byte for
// byte: testdata/receipts/<case>.json is the indented JSON of its Receipt
// under the built-in ruleset. A change of ruleset or of the receipt shape
// shows up here as a diff to review.
func TestGoldenReceipts(t *testing.T) {
	for _, c := range loadGateCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			res := Classify(c.evidence())
			checkGolden(t, filepath.Join("testdata", "receipts", c.Name+".json"), res.Receipt)
		})
	}
}

// checkGolden compares the indented JSON of v with the file at path (or
// writes it with -rewrite).
func checkGolden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *rewrite {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (create it with -rewrite): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file:\n got %s\nwant %s", path, got, want)
	}
}
