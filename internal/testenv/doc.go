// Package testenv decides what a test does when this machine lacks
// something it needs (a browser, the go command, a database, a role):
// with CI set it fails, since CI installs every dependency and a missing
// one is a broken run; elsewhere it skips, naming what is missing.
package testenv
