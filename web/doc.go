// Package web is artifactd's browser UI: read-only, server-rendered pages
// over a store.Store that show contexts, commits, artifacts, their trust and
// the provenance graph as a picture.
//
// New returns an http.Handler that httpapi mounts at "/" (through
// httpapi.Options.UI). Pages are html/template files and the stylesheet and
// one small script are embedded with go:embed: nothing is built or fetched
// at run time, and every page works with the script disabled.
//
// The assets answer with an ETag (their version) and evaluate If-Match,
// then If-None-Match, as every API read does, by the API's one evaluation
// (httpapi.Preconditions): 412 precondition-failed naming If-Match, or
// 304. The pages send no ETag and evaluate neither header.
//
// # Glossary
//
//   - page: one route of ServeHTTP; every page takes ?at= (a branch, a
//     commit id or a unique prefix of at least 8 hex digits, as
//     store.Resolve reads it) and names the commit it shows in a banner.
//   - picture: the part of a state the graph page draws: a small context
//     whole (at most 150 artifacts), else the overview; or, with ?root=,
//     a neighbourhood. At most 500 artifacts and 1,500 edges; a visible
//     "truncated" note says when more exist.
//   - overview: a large context drawn as clusters of artifacts sharing a
//     type (or producer) and a trust status, with the edges between
//     clusters counted; one pass over the state, cached by commit.
//   - neighbourhood: the artifacts ?up= hops along outgoing edges (what
//     the root rests on) and ?down= hops along incoming ones (what rests
//     on it) from a root, one each by default, plus one hop around each
//     ?expand= artifact (a click on a node adds it) and, with ?path=1,
//     the path to the root's poison root.
//   - said: the short text of what an artifact said (its "text", a
//     verdict and reason, a claim's value, or its first string member),
//     cut and cached by content hash; shown in nodes, rows and tooltips.
//   - time travel: the control on every context page: a slider over the
//     commits of a branch (its first-parent chain, oldest first; ?on=
//     names the branch when the shown commit is not its head) whose form
//     asks for ?step=N and is redirected to the same page and query at
//     that commit's ?at=; first, previous, next and last links; what
//     changed at the shown step (the store's diff against the first
//     parent: the artifacts added, changed and removed, edges and trust
//     changes, cached by commit; a bulk step of more than 2,000 ops by its
//     counts); and the commits around it, each linking to the same view.
//   - DOT: the Graphviz text the picture is described in; nodes are named
//     n0, n1… and every artifact string is a quoted graph.DOTString.
//   - sanitized SVG: Graphviz's SVG rewritten by sanitizeSVG from an
//     allowlist before it is inlined.
//   - label: an identifier as the UI shows it, its invisible code points
//     as escapes between ⟨ and ⟩ (labelParts, labelText).
//
// # Graph layout: Graphviz via github.com/goccy/go-graphviz
//
// The provenance graph is a layered DAG, which is exactly what Graphviz's
// dot engine is for: rank assignment, crossing reduction and spline routing
// that decades of use have tuned and that hand-written layout code would
// not match. go-graphviz ships Graphviz 12 compiled to WebAssembly and runs
// it with wazero, so it is pure Go: no cgo, no system package, the same
// output on every machine, and it stays inside the one artifactd binary.
// Laying out on the server (rather than with a JavaScript library in the
// browser) keeps the page free of third-party script under a strict CSP,
// makes the picture a plain SVG whose nodes are links, and lets tests
// assert on it through the DOM. The cost: the WebAssembly module is one per
// process and not safe for concurrent use, so layouts are serialized
// (gv.mu); go-graphviz compiles the module in an init function of every
// binary that links this package (about 0.1 s with its compilation cache in
// $TMPDIR/go-graphviz, under a second without) and adds about 10 MB to the
// binary; and a 500-node layout takes 0.3–1 s on two cores, which is why
// pictures are cached by their drawing (a commit never changes) and larger
// pictures use cheaper dot iteration limits and drop edge labels.
//
// # Hostile content
//
// Artifacts come from the web, so every string in them is treated as
// hostile. Pages are html/template with no template.HTML built from artifact
// data; the only template.HTML is sanitizeSVG's output. The DOT fed to
// Graphviz has no HTML labels and only quoted, escaped strings; the SVG
// that comes back is parsed and re-written from an allowlist of elements
// and presentation attributes (no script, style, foreignObject, image, use,
// event handlers or url(…) values), links are kept only when they point to
// this UI's own /ui/contexts/ paths, and all text is escaped again. URLs
// found in artifacts (receipts, sources) are shown as text, never linked or
// loaded. The explicit bidi controls (embeddings, overrides, isolates),
// which would reorder the page's own text after the value holding one,
// are shown as U+FFFD (showBidiControls). An identifier shown as a label
// (an artifact, context or branch id, a producer, an author: template
// "label", labelText in the drawings, tooltips and titles) shows every
// code point that draws nothing, draws as a space or is a control
// (graph.Unreadable: U+200B, U+FEFF, U+00A0, the Hangul fillers, and the
// other default-ignorable code points such as U+17B4 or U+2065, which an
// id may hold) and
// every byte that is not UTF-8 as a visible escape, "⟨U+200B⟩", boxed in
// HTML (class "esc"); a literal ⟨ or ⟩ in a name, or a bracket drawn like
// them, is escaped too, so two different identifiers never read alike and
// none reads like the UI's own marks between ⟨ ⟩ (the overview's merged
// cluster, "⟨12 other producers⟩"). Links still address the identifier
// byte for byte, and content (data, said texts, commit messages) is
// shown as written: it is evidence. Every response carries a
// Content-Security-Policy that allows only this origin's stylesheet and
// script (default-src 'none'; no inline script or style; frame-ancestors
// 'none'; base-uri 'none'; form-action 'self'), plus
// X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
//
// # Authentication
//
// When Options.Tokens is set, pages need a token with read access: the
// login form stores it in an HttpOnly, SameSite=Strict cookie (Secure over
// TLS), or a client may send "Authorization: Bearer". The two form posts
// (login, logout) check Origin / Sec-Fetch-Site. Nothing else accepts a
// POST: the UI has no mutation endpoints.
//
// # Cost
//
// A page reads the state under the store's read lock only long enough to
// collect what it shows, then renders outside it. The context page walks
// the sorted ids once and shows 100 artifacts per page, so a 10k-artifact
// context renders in 5–25 ms (TestBigContextTimes, BenchmarkContextPage10k).
// The overview of a 100k-artifact context is one pass over its artifacts
// and their out-edges (TestHugeContextGraphs, BenchmarkBuildClusters100k),
// cached by commit, and its picture by its DOT. The overview of a later
// commit of the context is derived from the last one's tally through the
// diff of the two commits (derivedTally), so a page reloaded while an
// agent writes costs what the commits changed, not the context's size
// (BenchmarkHugeOverviewAfterCommit). A neighbourhood touches only the
// artifacts it draws. Every page reports its server time in a
// Server-Timing header (app;dur=<ms>), which the browser tests read.
package web
