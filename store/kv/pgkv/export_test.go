package pgkv

import "time"

// SetKeepAlive sets how often d's holds show their holder is alive
// (0: never, as in a frozen process), for the tests.
func SetKeepAlive(d *Driver, every time.Duration) { d.keepEvery = every }

// SetCommitWait sets how long d waits for the answer to a COMMIT it sent
// (commitWait), for the tests.
func SetCommitWait(d *Driver, wait time.Duration) { d.commitWait = wait }

// SetResolveFloor sets the least time d asks the server for the outcome
// of a transaction whose answer to COMMIT was lost (resolveFloor), for
// the tests.
func SetResolveFloor(d *Driver, floor time.Duration) { d.resolveFloor = floor }
