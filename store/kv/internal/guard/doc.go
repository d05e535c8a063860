// Package guard tracks a driver's calls in flight so that Close can wait
// for them and refuse later calls with kv.ErrClosed.
package guard
