// Package badgerkv is the embedded kv.Driver: the storage seam on a Badger
// database in one directory. It is the only package under store/kv that
// imports Badger.
//
// # How the contract maps onto Badger
//
//   - Keys are stored as they are, without a prefix of the driver's own, so
//     the legacy store's data directories (key layout in store/doc.go) are
//     readable through the driver as they are.
//   - PutImmutable looks each key up in one read transaction and writes
//     the missing ones through a WriteBatch, which splits them into
//     transactions as large as Badger allows; a call is not atomic.
//   - Commit checks the swaps and writes the batch in one transaction, then
//     calls DB.Sync. The database is opened without per-write sync, so that
//     one sync makes durable the commit and everything written before it
//     (Badger's write-ahead log and value log are appended in order).
//     Commits are serialised by a mutex from the check to the
//     transaction's end, which makes the check and the write one atomic
//     step (Badger's own conflict detection is off); the sync runs outside
//     it, so commits from several goroutines overlap their syncs. A batch
//     beyond Badger's transaction limits (about 15 % of the memtable) fails
//     with kv.ErrTooLarge, having written nothing.
//   - A Commit's records are visible to readers once its transaction is
//     in, which is before the sync; Commit returns after the sync.
//   - Scan and ScanReverse each read one Badger read transaction, a
//     snapshot.
//   - The pages of the files Badger maps (tables, write-ahead and value
//     logs) count in the process's resident size although they are page
//     cache. Past Options.MappedBytes (default 64 MiB) a goroutine asks the
//     kernel to page the data directory's mappings out (Linux; mapped.go).
//   - Open deletes empty .mem and .vlog files, which a crash can leave and
//     which Badger v4 refuses to open (see removeEmptyLogs).
package badgerkv
