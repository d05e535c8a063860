// Package kvtest is the conformance suite of the storage seam: every
// kv.Driver's tests call Run (and, for a durable driver, RunCrash), so a
// new driver is done when the suite passes.
//
// Run covers point and batched reads, ordered prefix scans over binary
// keys (checked against a simple sorted-slice model), idempotent immutable
// puts, compare-and-swap success and failure with all-or-nothing batches,
// goroutines racing on one ref, large batches, context cancellation (a
// Commit canceled while it runs tells whether it landed) and a closed
// driver. RunCrash re-executes the test binary as a writer that
// commits the way the store does — immutable records, then one Commit
// moving a ref — kills it with SIGKILL at a seeded random moment, reopens
// the storage and checks that every acknowledged commit is there and that
// every begun one is wholly there or wholly absent.
//
// # Glossary
//
//   - model: a sorted slice of records that Scan results are compared with.
//   - round (concurrency): every goroutine reads the ref, then every one
//     tries to swap it from that value; exactly one may win.
//   - round (crash): one child run, killed, then the storage reopened and
//     checked.
package kvtest
