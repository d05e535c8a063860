// Package pgtest gives tests a PostgreSQL schema of their own in the test
// database, emptied when the test ends.
//
// The database is the one EnvDSN names (.ci/run starts one). A schema is
// created by the first pgkv.Open that names it; the driver has no way to
// drop one, so a test's schema keeps its empty tables and loses its
// records.
package pgtest
