// Package memkv is an in-memory kv.Driver for fast tests: the whole
// contract of the storage seam, no durability.
//
// Values live in a map; the sorted key list that Scan needs is merged
// lazily from the keys added since the last scan, so point writes cost
// O(1) and a scan after n new keys costs O(n log n) once. A scan copies
// the records it will visit under the lock (a snapshot) and calls fn
// without it, so fn may call the driver. Commit applies a batch under
// the lock or not at all and says which, so it never returns
// kv.ErrOutcomeUnknown (a test that needs that error wraps the driver).
package memkv
