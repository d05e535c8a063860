package hashing_test

import (
	"errors"
	"fmt"

	"github.com/artifactd/artifactd/hashing"
)

// The content hash of an artifact is the SHA-256 of its data in canonical
// JSON: key order and whitespace in the request do not matter.
func ExampleContentHash() {
	canonical, err := hashing.CanonicalizeObject([]byte(`{ "total": 45000.0, "currency": "USD" }`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(canonical))
	fmt.Println(hashing.ContentHash(canonical))
	// Output:
	// {"currency":"USD","total":45000}
	// sha256:39423ccecf3c3b584c410c820df8075c6c0bdb3bedd8734b315105e647c8ada8
}

// Input that would change meaning is refused with a pointer to the value.
func ExampleCanonicalize_error() {
	_, err := hashing.Canonicalize([]byte(`{"id": 12345678901234567890}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, hashing.ErrUnsafeInteger))
	// Output:
	// /id: integer 12345678901234567890 exceeds 2^53; send it as a string
	// true
}

// An Accumulator keeps the context hash of a changing set of leaves; the
// result depends only on the set.
func ExampleAccumulator() {
	ch := hashing.ContentHash([]byte(`{"text":"What was Q2 cloud spend?"}`))
	leaf := hashing.ArtifactLeaf("q:1", "question", 1, ch, "user")

	acc := hashing.NewAccumulator()
	acc.Add(leaf)
	fmt.Println(acc.Root())
	acc.Remove(leaf)
	fmt.Println(acc.Root() == hashing.EmptyContextHash())
	// Output:
	// sha256:d0fbb5a4fbd4835acec5d0aec8f657743a2db84b3791fc7fcc6823ee061b9c15
	// true
}
