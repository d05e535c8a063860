package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// BundleFormat is the format tag of the bundles this package reads and
// writes.
//
// A bundle is JSON Lines: one JSON object per line, each with a "type".
// The first line is the header; then come the commits in Seq order, each
// with its recorded ops; then the objects (the canonical data of every
// put, raw JSON, each once, in order of first use); then the blobs that
// the objects name (a string "sha256:<64 hex>" that is a stored blob),
// base64, in order of first reference:
//
//	{"type":"header","format":"artifactd-bundle/v1","context":ID,
//	 "settings":{"quarantine":"enforce","created":TIME},
//	 "branches":[{"name":"main","head":COMMIT}],"commits":N,"objects":N,"blobs":N}
//	{"type":"commit","id":…,"seq":1,"parents":[…],"context_hash":…,"ops_hash":…,
//	 "author":…,"message":…,"time":…,"artifacts":N,"edges":N,"ops":[…]}
//	{"type":"object","hash":"sha256:…","data":{…}}
//	{"type":"blob","hash":"sha256:…","base64":"…"}
//	{"type":"pruned","hash":"sha256:…","pruned_at":TIME}
//
// A pruned line stands for a named blob whose bytes the store pruned after
// its retention window (a spilled tool output): the bundle carries the
// fact, not the bytes; the header counts them as "pruned" (omitted when
// there are none, so bundles without pruned blobs are unchanged). No hash
// covers a pruned line's time (nor the header's settings): an importer
// keeps its own record of a blob it pruned itself.
//
// Nothing in a bundle depends on when or where it was written: exporting
// the same commits twice gives the same bytes.
const BundleFormat = "artifactd-bundle/v1"

// ErrBundle marks a bundle that cannot be read: no header, an unknown
// format, lines that are not what they claim, counts that do not match.
var ErrBundle = errors.New("malformed bundle")

// BundleSettings are a context's settings as a bundle carries them.
type BundleSettings struct {
	Quarantine string `json:"quarantine"`
	Created    string `json:"created,omitempty"`
}

// BundleBranch is a branch and its head.
type BundleBranch struct {
	Name string         `json:"name"`
	Head hashing.Digest `json:"head"`
}

// BundleHeader is the first line of a bundle. The counts say how many
// lines of each kind follow.
type BundleHeader struct {
	Format   string         `json:"format"`
	Context  string         `json:"context"`
	Settings BundleSettings `json:"settings"`
	Branches []BundleBranch `json:"branches"`
	Commits  int            `json:"commits"`
	Objects  int            `json:"objects"`
	Blobs    int            `json:"blobs"`
	Pruned   int            `json:"pruned,omitempty"`
}

// Branch returns the head of the named branch.
func (h *BundleHeader) Branch(name string) (hashing.Digest, bool) {
	for _, b := range h.Branches {
		if b.Name == name {
			return b.Head, true
		}
	}
	return hashing.Digest{}, false
}

type headerLine struct {
	Type string `json:"type"`
	BundleHeader
}

type commitLine struct {
	Type        string           `json:"type"`
	ID          hashing.Digest   `json:"id"`
	Seq         uint64           `json:"seq"`
	Parents     []hashing.Digest `json:"parents"`
	ContextHash hashing.Digest   `json:"context_hash"`
	OpsHash     hashing.Digest   `json:"ops_hash"`
	Author      string           `json:"author"`
	Message     string           `json:"message"`
	Time        string           `json:"time"`
	Artifacts   int              `json:"artifacts"`
	Edges       int              `json:"edges"`
	Ops         []graph.Op       `json:"ops"`
}

type objectLine struct {
	Type string          `json:"type"`
	Hash hashing.Digest  `json:"hash"`
	Data json.RawMessage `json:"data"`
}

type prunedLine struct {
	Type     string         `json:"type"`
	Hash     hashing.Digest `json:"hash"`
	PrunedAt string         `json:"pruned_at"`
}

type blobLine struct {
	Type   string         `json:"type"`
	Hash   hashing.Digest `json:"hash"`
	Base64 string         `json:"base64"`
}

// ---- writing ----

// BundleWriter writes one bundle: the header at creation, then commits,
// objects and blobs in that order. Close flushes and checks that what was
// written matches the header's counts. It is not safe for concurrent use.
type BundleWriter struct {
	w      *bufio.Writer
	h      BundleHeader
	stage  int // 0 commits, 1 objects, 2 blobs, 3 pruned blobs
	counts [4]int
	err    error
}

// NewBundleWriter writes the header line to w. h.Format defaults to
// BundleFormat.
func NewBundleWriter(w io.Writer, h BundleHeader) (*BundleWriter, error) {
	if h.Format == "" {
		h.Format = BundleFormat
	}
	if h.Branches == nil {
		h.Branches = []BundleBranch{}
	}
	bw := &BundleWriter{w: bufio.NewWriterSize(w, 1<<16), h: h}
	bw.line(headerLine{Type: "header", BundleHeader: h})
	return bw, bw.err
}

func (bw *BundleWriter) line(v any) {
	if bw.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		bw.err = err
		return
	}
	bw.raw(b)
}

func (bw *BundleWriter) raw(parts ...[]byte) {
	if bw.err != nil {
		return
	}
	for _, p := range parts {
		if _, err := bw.w.Write(p); err != nil {
			bw.err = err
			return
		}
	}
	bw.err = bw.w.WriteByte('\n')
}

func (bw *BundleWriter) enter(stage int, what string) error {
	if bw.err != nil {
		return bw.err
	}
	if stage < bw.stage {
		return fmt.Errorf("replay: bundle: %s written after the %s section", what, [...]string{"commit", "object", "blob", "pruned blob"}[bw.stage])
	}
	bw.stage = stage
	bw.counts[stage]++
	return nil
}

// Commit writes a commit line with its recorded ops. Commits must come in
// Seq order, before any object.
func (bw *BundleWriter) Commit(c *Commit, ops []graph.Op) error {
	if err := bw.enter(0, "a commit"); err != nil {
		return err
	}
	parents := c.Parents
	if parents == nil {
		parents = []hashing.Digest{}
	}
	if ops == nil {
		ops = []graph.Op{}
	}
	bw.line(commitLine{Type: "commit", ID: c.ID, Seq: c.Seq, Parents: parents, ContextHash: c.ContextHash, OpsHash: c.OpsHash,
		Author: c.Author, Message: c.Message, Time: c.Time, Artifacts: c.Artifacts, Edges: c.Edges, Ops: ops})
	return bw.err
}

// Object writes an object line. data must be the canonical bytes the
// content hash d covers; they are written as they are.
func (bw *BundleWriter) Object(d hashing.Digest, data []byte) error {
	if err := bw.enter(1, "an object"); err != nil {
		return err
	}
	if bytes.IndexByte(data, '\n') >= 0 {
		return fmt.Errorf("replay: bundle: object %s holds a newline, so it is not canonical JSON", d.Short())
	}
	bw.raw([]byte(`{"type":"object","hash":"`+d.String()+`","data":`), data, []byte("}"))
	return bw.err
}

// Blob writes a blob line (base64 of data).
func (bw *BundleWriter) Blob(d hashing.Digest, data []byte) error {
	if err := bw.enter(2, "a blob"); err != nil {
		return err
	}
	bw.line(blobLine{Type: "blob", Hash: d, Base64: base64.StdEncoding.EncodeToString(data)})
	return bw.err
}

// Pruned writes a pruned line: blob d was named but its bytes were pruned
// at prunedAt.
func (bw *BundleWriter) Pruned(d hashing.Digest, prunedAt string) error {
	if err := bw.enter(3, "a pruned blob"); err != nil {
		return err
	}
	bw.line(prunedLine{Type: "pruned", Hash: d, PrunedAt: prunedAt})
	return bw.err
}

// Close flushes the bundle and checks the header's counts.
func (bw *BundleWriter) Close() error {
	if bw.err != nil {
		return bw.err
	}
	if err := bw.w.Flush(); err != nil {
		return err
	}
	if got, want := bw.counts, [4]int{bw.h.Commits, bw.h.Objects, bw.h.Blobs, bw.h.Pruned}; got != want {
		return fmt.Errorf("replay: bundle: wrote %d commits, %d objects, %d blobs, %d pruned; the header says %d, %d, %d, %d",
			got[0], got[1], got[2], got[3], want[0], want[1], want[2], want[3])
	}
	return nil
}

// PrunedBlobStore is a BlobStore that can say a named blob's bytes were
// pruned (and when); an exporter then writes a pruned line for it.
type PrunedBlobStore interface {
	BlobPruned(ctx context.Context, d hashing.Digest) (prunedAt string, ok bool)
}

// BlobStore gives an exporter the blobs that objects may name. The store
// implements it.
type BlobStore interface {
	HasBlob(ctx context.Context, d hashing.Digest) (bool, error)
	GetBlob(ctx context.Context, d hashing.Digest) ([]byte, error)
}

// ExportBundle writes a bundle of commits (which must be sorted by Seq and
// closed under parents) read from src: their ops, the object of every put
// (checked against its content hash; a mismatch is an error, so a corrupt
// store is never exported as if it were sound) and every blob of blobs
// that an object names. It returns the header it wrote, with the counts
// filled in. blobs may be nil.
func ExportBundle(ctx context.Context, w io.Writer, h BundleHeader, src Source, commits []*Commit, blobs BlobStore) (*BundleHeader, error) {
	ops := make([][]graph.Op, len(commits))
	var objects []hashing.Digest
	seenObj := map[hashing.Digest]bool{}
	for i, c := range commits {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o, err := src.Ops(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("export commit %s: %w", c.ID.Short(), err)
		}
		ops[i] = o
		for _, op := range o {
			if op.Op == graph.OpPut && !seenObj[op.ContentHash] {
				seenObj[op.ContentHash] = true
				objects = append(objects, op.ContentHash)
			}
		}
	}
	var blobIDs []hashing.Digest
	type prunedBlob struct {
		d  hashing.Digest
		at string
	}
	var pruned []prunedBlob
	pstore, _ := blobs.(PrunedBlobStore)
	if blobs != nil {
		seenBlob := map[hashing.Digest]bool{}
		for _, d := range objects {
			data, err := exportObject(ctx, src, d)
			if err != nil {
				return nil, err
			}
			for _, ref := range BlobRefs(data) {
				if seenBlob[ref] {
					continue
				}
				seenBlob[ref] = true
				ok, err := blobs.HasBlob(ctx, ref)
				if err != nil {
					return nil, fmt.Errorf("export blob %s: %w", ref.Short(), err)
				}
				if ok {
					blobIDs = append(blobIDs, ref)
				} else if pstore != nil {
					if at, was := pstore.BlobPruned(ctx, ref); was {
						pruned = append(pruned, prunedBlob{ref, at})
					}
				}
			}
		}
	}
	h.Commits, h.Objects, h.Blobs, h.Pruned = len(commits), len(objects), len(blobIDs), len(pruned)
	bw, err := NewBundleWriter(w, h)
	if err != nil {
		return nil, err
	}
	for i, c := range commits {
		if err := bw.Commit(c, ops[i]); err != nil {
			return nil, err
		}
	}
	for _, d := range objects {
		data, err := exportObject(ctx, src, d)
		if err != nil {
			return nil, err
		}
		if err := bw.Object(d, data); err != nil {
			return nil, err
		}
	}
	for _, d := range blobIDs {
		data, err := blobs.GetBlob(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("export blob %s: %w", d.Short(), err)
		}
		if hashing.Sum(data) != d {
			return nil, fmt.Errorf("export blob %s: %w: its bytes do not match its hash", d.Short(), ErrBroken)
		}
		if err := bw.Blob(d, data); err != nil {
			return nil, err
		}
	}
	for _, p := range pruned {
		if err := bw.Pruned(p.d, p.at); err != nil {
			return nil, err
		}
	}
	if err := bw.Close(); err != nil {
		return nil, err
	}
	return &bw.h, nil
}

func exportObject(ctx context.Context, src Source, d hashing.Digest) ([]byte, error) {
	data, err := src.Object(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("export object %s: %w", d.Short(), err)
	}
	if hashing.ContentHash(data) != d {
		return nil, fmt.Errorf("export object %s: %w: its bytes do not match its content hash", d.Short(), ErrBroken)
	}
	return data, nil
}

// BlobRefs returns the distinct strings of data (member names and values,
// at any depth) that are well-formed digests "sha256:<64 hex>", in order of
// first appearance: the blobs an object may name. Malformed JSON yields
// the references before the error.
func BlobRefs(data []byte) []hashing.Digest {
	if !bytes.Contains(data, []byte("sha256:")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []hashing.Digest
	seen := map[hashing.Digest]bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		s, ok := tok.(string)
		if !ok || len(s) != len("sha256:")+64 || !strings.HasPrefix(s, "sha256:") {
			continue
		}
		if d, err := hashing.ParseDigest(s); err == nil && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
}

// ---- reading ----

// Bundle is a bundle read into memory. It implements Source, so Fold
// verifies a bundle with no store; Verify checks the whole file. A Bundle
// is immutable once read and safe for concurrent use.
type Bundle struct {
	Header BundleHeader
	// Defects lists lines that could not be read (unparseable, duplicated,
	// of an unknown type); the records on them are missing from the
	// bundle.
	Defects []string

	commits   map[hashing.Digest]*Commit
	ordered   []*Commit
	ops       map[hashing.Digest][]graph.Op
	objects   map[hashing.Digest][]byte
	blobs     map[hashing.Digest][]byte
	blobOrder []hashing.Digest
	pruned    map[hashing.Digest]string
	counts    [4]int
}

// ReadBundle reads a bundle. It fails (ErrBundle) only when there is no
// valid header; a line that cannot be read is recorded in Defects and its
// record left out, so that Verify can name the first commit it breaks.
func ReadBundle(r io.Reader) (*Bundle, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	b := &Bundle{commits: map[hashing.Digest]*Commit{}, ops: map[hashing.Digest][]graph.Op{},
		objects: map[hashing.Digest][]byte{}, blobs: map[hashing.Digest][]byte{}, pruned: map[hashing.Digest]string{}}
	n := 0
	sawHeader := false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			n++
			line = bytes.TrimRight(line, "\r\n")
			if len(bytes.TrimSpace(line)) > 0 {
				if !sawHeader {
					if herr := b.readHeader(line); herr != nil {
						return nil, fmt.Errorf("%w: line %d: %v", ErrBundle, n, herr)
					}
					sawHeader = true
				} else if lerr := b.readLine(line); lerr != nil {
					b.Defects = append(b.Defects, fmt.Sprintf("line %d: %v", n, lerr))
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read bundle: %w", err)
		}
	}
	if !sawHeader {
		return nil, fmt.Errorf("%w: the file is empty; want a %q header line", ErrBundle, BundleFormat)
	}
	for _, c := range b.commits {
		b.ordered = append(b.ordered, c)
	}
	sort.Slice(b.ordered, func(i, j int) bool {
		if b.ordered[i].Seq != b.ordered[j].Seq {
			return b.ordered[i].Seq < b.ordered[j].Seq
		}
		return bytes.Compare(b.ordered[i].ID[:], b.ordered[j].ID[:]) < 0
	})
	return b, nil
}

func (b *Bundle) readHeader(line []byte) error {
	var h headerLine
	if err := json.Unmarshal(line, &h); err != nil {
		return fmt.Errorf("the header is not valid JSON: %v", err)
	}
	if h.Type != "header" {
		return fmt.Errorf("the first line has type %q; want the header", h.Type)
	}
	if h.Format != BundleFormat {
		return fmt.Errorf("format %q is not %q", h.Format, BundleFormat)
	}
	b.Header = h.BundleHeader
	return nil
}

func (b *Bundle) readLine(line []byte) error {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &t); err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	switch t.Type {
	case "commit":
		var cl commitLine
		if err := json.Unmarshal(line, &cl); err != nil {
			return fmt.Errorf("commit: %v", err)
		}
		if b.commits[cl.ID] != nil {
			return fmt.Errorf("commit %s appears twice", cl.ID.Short())
		}
		b.counts[0]++
		parents := cl.Parents
		if parents == nil {
			parents = []hashing.Digest{}
		}
		ops := cl.Ops
		if ops == nil {
			ops = []graph.Op{}
		}
		b.commits[cl.ID] = &Commit{ID: cl.ID, Parents: parents, ContextHash: cl.ContextHash, OpsHash: cl.OpsHash,
			Author: cl.Author, Message: cl.Message, Time: cl.Time, Seq: cl.Seq, NumOps: len(ops), Artifacts: cl.Artifacts, Edges: cl.Edges}
		b.ops[cl.ID] = ops
	case "object":
		var ol objectLine
		if err := json.Unmarshal(line, &ol); err != nil {
			return fmt.Errorf("object: %v", err)
		}
		if _, dup := b.objects[ol.Hash]; dup {
			return fmt.Errorf("object %s appears twice", ol.Hash.Short())
		}
		b.counts[1]++
		b.objects[ol.Hash] = ol.Data
	case "blob":
		var bl blobLine
		if err := json.Unmarshal(line, &bl); err != nil {
			return fmt.Errorf("blob: %v", err)
		}
		data, err := base64.StdEncoding.DecodeString(bl.Base64)
		if err != nil {
			return fmt.Errorf("blob %s: %v", bl.Hash.Short(), err)
		}
		if _, dup := b.blobs[bl.Hash]; dup {
			return fmt.Errorf("blob %s appears twice", bl.Hash.Short())
		}
		b.counts[2]++
		b.blobs[bl.Hash] = data
		b.blobOrder = append(b.blobOrder, bl.Hash)
	case "pruned":
		var pl prunedLine
		if err := json.Unmarshal(line, &pl); err != nil {
			return fmt.Errorf("pruned: %v", err)
		}
		if _, dup := b.pruned[pl.Hash]; dup {
			return fmt.Errorf("pruned blob %s appears twice", pl.Hash.Short())
		}
		b.counts[3]++
		b.pruned[pl.Hash] = pl.PrunedAt
	case "header":
		return errors.New("a second header")
	default:
		return fmt.Errorf("unknown line type %q", t.Type)
	}
	return nil
}

// errNotInBundle is wrapped by Source lookups that find nothing.
var errNotInBundle = errors.New("not in the bundle")

// GetCommit returns a commit of the bundle.
func (b *Bundle) GetCommit(ctx context.Context, id hashing.Digest) (*Commit, error) {
	if c := b.commits[id]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("commit %s: %w", id.Short(), errNotInBundle)
}

// Ops returns a commit's recorded ops.
func (b *Bundle) Ops(ctx context.Context, c *Commit) ([]graph.Op, error) {
	ops, ok := b.ops[c.ID]
	if !ok {
		return nil, fmt.Errorf("ops of commit %s: %w", c.ID.Short(), errNotInBundle)
	}
	return ops, nil
}

// Object returns an object's bytes as the bundle holds them (unchecked).
func (b *Bundle) Object(ctx context.Context, d hashing.Digest) ([]byte, error) {
	data, ok := b.objects[d]
	if !ok {
		return nil, fmt.Errorf("object %s: %w", d.Short(), errNotInBundle)
	}
	return data, nil
}

// Blob returns a blob's bytes as the bundle holds them (unchecked).
func (b *Bundle) Blob(d hashing.Digest) ([]byte, bool) {
	data, ok := b.blobs[d]
	return data, ok
}

// Pruned reports whether the bundle says blob d was pruned, and when.
func (b *Bundle) Pruned(d hashing.Digest) (string, bool) {
	at, ok := b.pruned[d]
	return at, ok
}

// PrunedBlobs returns the pruned blobs of the bundle with their times.
func (b *Bundle) PrunedBlobs() map[hashing.Digest]string {
	out := make(map[hashing.Digest]string, len(b.pruned))
	for d, at := range b.pruned {
		out[d] = at
	}
	return out
}

// Blobs returns the bundle's blob digests in file order.
func (b *Bundle) Blobs() []hashing.Digest { return append([]hashing.Digest(nil), b.blobOrder...) }

// Commits returns the bundle's commits sorted by Seq (then id).
func (b *Bundle) Commits() []*Commit { return append([]*Commit(nil), b.ordered...) }

// Resolve turns a reference into a commit of the bundle: "" (the main
// branch, or the last commit when the header names no main), a branch of
// the header, a full id, bare hex, or a unique prefix of at least 8 hex
// digits. A branch whose head is missing from the bundle resolves to a
// *ChainError naming the head. A branch named with hex digits is refused
// as ambiguous when another commit's id starts with them, and a full id
// is the commit, as in the store.
func (b *Bundle) Resolve(ref string) (*Commit, error) {
	if ref == "" {
		if _, ok := b.Header.Branch("main"); !ok {
			if len(b.ordered) == 0 {
				return nil, fmt.Errorf("%w: the bundle has no commits", ErrBundle)
			}
			return b.ordered[len(b.ordered)-1], nil
		}
		ref = "main"
	}
	prefix, perr := hashing.HexPrefix(ref)
	if head, ok := b.Header.Branch(ref); ok {
		c := b.commits[head]
		if c == nil {
			return nil, &ChainError{Commit: head, Reason: fmt.Sprintf("the head of branch %q is not in the bundle (a commit line was removed?)", ref)}
		}
		if perr != nil {
			return c, nil
		}
		// A branch named with hex digits (which a store no longer
		// creates): a full id is the commit, and a prefix of another
		// commit names both.
		var other *Commit
		for _, o := range b.ordered {
			if o.ID != head && strings.HasPrefix(o.ID.Hex(), prefix) {
				other = o
			}
		}
		switch {
		case other == nil:
			return c, nil
		case len(prefix) == 64:
			return other, nil
		}
		return nil, fmt.Errorf("%s is both a branch of the bundle (at %s) and a prefix of commit %s; give sha256:%s for the commit, or the branch's head %s", ref, head.Short(), other.ID.Short(), ref, head.Short())
	}
	if perr != nil {
		return nil, fmt.Errorf("%q is neither a branch of the bundle nor a commit id (want sha256:<hex>, bare hex or a prefix of at least 8 hex digits)", ref)
	}
	var match *Commit
	for _, c := range b.ordered {
		if strings.HasPrefix(c.ID.Hex(), prefix) {
			if match != nil {
				return nil, fmt.Errorf("%s matches more than one commit of the bundle; give more digits", prefix)
			}
			match = c
		}
	}
	if match == nil {
		return nil, fmt.Errorf("no commit of the bundle starts with %s", prefix)
	}
	return match, nil
}

// Verify checks the whole bundle and returns the state at ref (see
// Resolve). It folds every commit of the bundle in Seq order as
// FoldCommits does (whatever opts.Objects says, every put's object is
// re-hashed: a bundle claims to be self-contained), checks that every
// parent and branch head is in the bundle, that every blob matches its
// hash, that no line was unreadable and that the header's counts match.
// Errors: a *ChainError (ErrBroken) naming the first commit, in Seq order,
// that fails; ErrBundle for defects no commit explains.
func (b *Bundle) Verify(ctx context.Context, ref string, opts Options) (*Result, error) {
	target, err := b.Resolve(ref)
	if err != nil {
		return nil, err
	}
	if len(b.ordered) == 0 {
		return nil, fmt.Errorf("%w: the bundle has no commits", ErrBundle)
	}
	opts.Objects = ObjectsAll
	// The first commit with a parent missing from the bundle; commits
	// before it (lower Seq) are folded first, as a broken one among them
	// comes first in chain order.
	commits, missing := b.ordered, (*ChainError)(nil)
	for i, c := range b.ordered {
		for _, p := range c.Parents {
			if missing != nil {
				break
			}
			switch pc := b.commits[p]; {
			case pc == nil:
				missing = &ChainError{Commit: c.ID, Seq: c.Seq, Reason: fmt.Sprintf("its parent %s is not in the bundle (a commit line was removed?)", p.Short())}
			case pc.Seq >= c.Seq:
				// Seq is outside the id: a parent must come first, or a
				// store that imports the bundle holds a chain it cannot
				// fold (replay.Fold walks parents to lower seqs).
				missing = &ChainError{Commit: c.ID, Seq: c.Seq, Reason: fmt.Sprintf("its parent %s has seq %d, not below its own", p.Short(), pc.Seq)}
			}
			if missing != nil {
				commits = b.ordered[:i]
			}
		}
	}
	var res *Result
	var at *graph.State
	if len(commits) > 0 {
		last := commits[len(commits)-1]
		res, err = FoldCommits(ctx, b, commits, opts, func(c *Commit, st *graph.State) error {
			if c.ID == target.ID && c != last {
				at = st.Clone()
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if missing != nil {
		return nil, missing
	}
	if err := b.checkRest(); err != nil {
		return nil, err
	}
	if at != nil {
		res.State, res.Commit = at, target
	}
	return res, nil
}

// checkRest checks what a fold does not: branch heads, blobs, unreadable
// lines and the header's counts.
func (b *Bundle) checkRest() error {
	names := map[string]bool{}
	for _, br := range b.Header.Branches {
		if names[br.Name] {
			// Which head would be the branch's? A verifier reads the
			// first, an importer might set the last.
			return fmt.Errorf("%w: the header names branch %q twice", ErrBundle, br.Name)
		}
		names[br.Name] = true
		if b.commits[br.Head] == nil {
			return &ChainError{Commit: br.Head, Reason: fmt.Sprintf("the head of branch %q is not in the bundle (a commit line was removed?)", br.Name)}
		}
	}
	for _, d := range b.blobOrder {
		if hashing.Sum(b.blobs[d]) == d {
			continue
		}
		if c := b.firstUse(d); c != nil {
			return &ChainError{Commit: c.ID, Seq: c.Seq, Reason: fmt.Sprintf("blob %s that one of its artifacts names does not match its hash", d.Short())}
		}
		return fmt.Errorf("%w: blob %s does not match its hash", ErrBundle, d.Short())
	}
	if len(b.Defects) > 0 {
		return fmt.Errorf("%w: %d unreadable line(s): %s", ErrBundle, len(b.Defects), strings.Join(b.Defects, "; "))
	}
	if got, want := b.counts, [4]int{b.Header.Commits, b.Header.Objects, b.Header.Blobs, b.Header.Pruned}; got != want {
		return fmt.Errorf("%w: it holds %d commits, %d objects, %d blobs, %d pruned; its header says %d, %d, %d, %d (lines were removed or added)",
			ErrBundle, got[0], got[1], got[2], got[3], want[0], want[1], want[2], want[3])
	}
	return nil
}

// firstUse returns the first commit (Seq order) that puts an object
// naming blob d.
func (b *Bundle) firstUse(d hashing.Digest) *Commit {
	for _, c := range b.ordered {
		for _, op := range b.ops[c.ID] {
			if op.Op != graph.OpPut {
				continue
			}
			for _, ref := range BlobRefs(b.objects[op.ContentHash]) {
				if ref == d {
					return c
				}
			}
		}
	}
	return nil
}

// Ancestors returns target and every commit it reaches through any parent,
// sorted by Seq: the commits an export at target holds. Errors are
// *ChainError.
func Ancestors(ctx context.Context, src Source, target hashing.Digest) ([]*Commit, error) {
	return ancestors(ctx, src, target)
}
