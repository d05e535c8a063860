package pgkv

import "time"

// SetKeepAlive sets how often d's holds show their holder is alive
// (0: never, as in a frozen process), for the tests.
func SetKeepAlive(d *Driver, every time.Duration) { d.keepEvery = every }

// SetCommitWait sets how long d waits for the answer to a COMMIT it sent
// (commitWait), for the tests.
func SetCommitWait(d *Driver, wait time.Duration) { d.commitWait = wait }

// SetCommitIdle sets the idle timeout d's Commit transactions arm
// (0: half the commit wait, at least a second), for the tests.
func SetCommitIdle(d *Driver, idle time.Duration) { d.commitIdle = idle }

// SetResolveFloor sets the least time d asks the server for the outcome
// of a transaction whose answer to COMMIT was lost (resolveFloor), for
// the tests.
func SetResolveFloor(d *Driver, floor time.Duration) { d.resolveFloor = floor }

// SetRetryWindow sets how long d runs a transaction again after its
// first run (retryWindow), for the tests.
func SetRetryWindow(d *Driver, w time.Duration) { d.retryWindow = w }

// ConnectTimeout returns the connect timeout of d's connections.
func ConnectTimeout(d *Driver) time.Duration { return d.pool.Config().ConnConfig.ConnectTimeout }

// PutCommitWait returns how long d's puts wait for the answer to their
// COMMIT.
func PutCommitWait(d *Driver) time.Duration { return d.putCommitWait() }
