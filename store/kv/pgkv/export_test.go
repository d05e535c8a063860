package pgkv

import "time"

// SetKeepAlive sets how often d's holds show their holder is alive
// (0: never, as in a frozen process), for the tests.
func SetKeepAlive(d *Driver, every time.Duration) { d.keepEvery = every }
