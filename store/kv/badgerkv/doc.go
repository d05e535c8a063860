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
//     PutSame writes without the lookups; a bulk one (values of 128 bytes
//     or more adding up to 64 KiB: a bulk commit's payloads, state-map
//     nodes and op chunks) first writes those values to a pack file in
//     packs/ and syncs it, and the tree gets, under each key, only where
//     its value lies (pack.go). Compactions then never copy those values,
//     and small commits, whose records go to the tree as before, sync
//     nothing more. A packed value is read with one pread through the page
//     cache and checked against its CRC-32C; a batched read (GetMany,
//     GetSame) reads values lying within 4 KiB of one another in a pack
//     with one pread of up to 1 MiB, and looks 16 keys or more up in the
//     order of the keys. A missing pack, a short read or a wrong checksum
//     is a *kv.UnreadableError naming the value's key. Pack space is not
//     reclaimed: the store never deletes what it puts with PutSame
//     (kv.SamePutter); a delete drops the pointer.
//   - Badger writes one batch at a time, so a commit that arrives while a
//     bulk put is written waits for the whole put. While commits are
//     being made (one writing, or one begun within 10 ms), a bulk put
//     therefore gives way: it is written in chunks of 1,024 records or
//     1 MiB, each synced before the next, and a commit waits for one
//     chunk; alone, a put is one batch, since each chunk costs a sync
//     (badgerkv.go, putChunkRecords).
//   - Commit checks the swaps and writes the batch in one transaction.
//     Commits are serialised by a mutex from the check to the
//     transaction's end, which makes the check and the write one atomic
//     step (Badger's own conflict detection is off). A batch beyond
//     Badger's transaction limits (about 15 % of the memtable) fails with
//     kv.ErrTooLarge, having written nothing. Badger runs in this
//     process and answers every write it starts, so Commit never returns
//     kv.ErrOutcomeUnknown: a write that failed is an I/O error (whose
//     batch may be visible and yet lost on a restart, see below).
//   - A pack is synced before the tree write that points into it, and a
//     new pack file's name (its directory synced) before its first
//     pointer, so a crash leaves at most bytes nothing points to; after
//     an open, packs are written to a new file. A failed pack sync, like
//     a failed value-log sync, fails every later write.
//   - Every write is durable when Badger returns it: the database is
//     opened with SyncWrites (unless Options.NoSync), under which Badger's
//     one writer goroutine appends a group of transactions' large values
//     to the value log and syncs it, then appends each transaction's
//     entries — pointers into the value log among them — to the
//     write-ahead log and syncs that. Transactions that reach the writer
//     together (a WriteBatch's, or puts from several goroutines) share
//     the value-log sync; the write-ahead log is synced once per
//     transaction. The write-ahead log therefore never holds a pointer to
//     a value the disk may lack, even across a power loss — on a file
//     system that makes a synced file's creation durable with it (ext4,
//     XFS): Badger syncs the directory for its tables and manifest, not
//     for a new log file. When the writes succeed, a transaction's
//     records are visible to readers only after both syncs.
//   - Badger logs a failed value-log sync rather than returning it; the
//     driver watches its logger for that line and fails every write after
//     it, before writing (badgerlog.go). Badger's errors and warnings go
//     to Options.Logger, each message at most once every ten seconds.
//   - Badger also logs a failed value-log read and returns no value
//     (iterator.go). The driver reports a value that has a size but came
//     back empty as a *kv.UnreadableError (corruption, naming the key, so
//     that fsck can report it and go on); Get and GetMany first read it once
//     more, since a point read does not hold the value-log files open and
//     a collection may have just moved the value.
//   - Scan and ScanReverse each read one Badger read transaction, a
//     snapshot.
//   - A new Badger read transaction waits until every write given a
//     timestamp before it is done, its syncs included, so Get and GetMany
//     wait behind the writes in flight. GetSame (kv.SameGetter: keys that
//     name their values — state-map nodes, payloads) reads in a read
//     transaction a goroutine takes when asked and shares until a newer
//     one replaces it (asked for once it is a second old; snapshot.go),
//     and reads only the keys it lacks afresh; a Commit that deletes keys
//     drops it. During back-to-back one-record
//     commits a point read's p99 falls from 0.47 ms to 22–28 µs
//     (BenchmarkGetDuringSmallCommits).
//   - The pages of the files Badger maps (tables, write-ahead and value
//     logs) count in the process's resident size although they are page
//     cache. Past Options.MappedBytes (default 64 MiB) a goroutine asks the
//     kernel to page the data directory's mappings out (Linux; mapped.go).
//   - Values past Options.ValueThreshold (default 1 KiB: op chunks, leaf
//     checkpoints, larger payloads, blob chunks; state-map nodes are
//     mostly smaller and stay in the tree) live in Badger's value log
//     and the tree holds their keys and pointers, so compactions copy
//     keys, not values; tables are written uncompressed unless
//     Options.Compress. Every ten minutes a goroutine rewrites value-log
//     files that are at least half deleted values (pruned blobs;
//     CollectValueLog does it at once). Badger counts a file's deleted
//     values as compactions drop them, and never rewrites the file it is
//     appending to (files are 1 GiB), so space comes back only once the
//     log has moved on to a later file. The rewrite writes the live values
//     again through the synced write path before Badger deletes the old
//     file. No collection runs after a failed value-log sync, nor on its
//     own under NoSync. Close stops the collector after the file it is
//     rewriting. Stores written before keep their values where they are;
//     both read the same.
//   - Tables below level 0 are Options.TableBytes (default 512 KiB) at
//     every level: a compaction writes each table through a mapping and
//     syncs it whole, and a synced commit's fsync waits behind that write,
//     so small tables keep commits' tails short while a big store
//     compacts (DefaultTableBytes), at the cost of more open files.
//   - Open deletes empty .mem and .vlog files, which a crash can leave and
//     which Badger v4 refuses to open (see removeEmptyLogs).
package badgerkv
