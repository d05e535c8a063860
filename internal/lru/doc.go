// Package lru is a least-recently-used map bounded by the sum of its
// entries' costs, safe for concurrent use: the one cache shape the store,
// the service layer and the web UI keep their derived results in.
//
// An entry's cost is what its cost function says (bytes, as the caller
// estimates them, or 1 an entry); past the bound the least recently used
// entries go. An entry that alone costs more than the bound is not kept,
// and the others stay.
package lru
