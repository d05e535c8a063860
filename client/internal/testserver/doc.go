// Package testserver builds the artifactd binary and runs `artifactd
// serve` on a temporary data directory and a free loopback port, for the
// client tests.
package testserver
