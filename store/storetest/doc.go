// Package storetest checks that several stores over one shared storage
// driver — several artifactd processes on one database — keep every
// acknowledged commit exactly once, in one linear history per branch.
//
// Each driver's tests call RunShared with a function opening a driver on
// one shared database (PostgreSQL), or on one in-memory driver wrapped to
// report itself shared.
package storetest
