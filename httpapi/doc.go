// Package httpapi is artifactd's HTTP API: the main door through which an
// agent in any language writes typed artifacts and reads them back.
//
// It routes with chi, validates every artifact against its type's JSON
// Schema (draft 2020-12, santhosh-tekuri/jsonschema/v6), answers every
// error as RFC 9457 application/problem+json, checks bearer tokens, limits
// bodies, and streams large reads. It holds no state of its own beyond the
// type registry's cache and counters: everything else is in the store.
//
// # Glossary
//
//   - Server: the http.Handler; each handler decodes, calls the service
//     layer (Server.Service, package service) and writes its answer. The
//     use cases — writes, the gate, tool results, the outbox, types and
//     relations — live in package service, whose wire types this package
//     names with aliases.
//   - Registry: service.Registry, the artifact types (built-ins and user
//     types) with their compiled schemas and trust roles.
//   - Problem: an error response; its type is ProblemTypePrefix + a code
//     from problemTable, the one table that maps the codes of package
//     fault to HTTP statuses (StatusOf; web's pages use it too).
//   - Pointer: an RFC 6901 JSON pointer into the request body naming what
//     a problem is about (/data/price, /ops/3/to, /edges/0/rel).
//   - Grant: a token's scope (read, write, admin) on context id patterns.
//   - Gate path (service): GatePutArtifact, the only way to write the reserved
//     fetch_verdict type; it refuses a verdict that its receipt and stored
//     body blob do not bear out. POST .../fetches reaches it through
//     service.RecordFetch, which classifies the evidence itself.
//   - Tool results (service): RecordToolResult stores gate's
//     sanitised model view of a tool error or output, the full masked text
//     as a blob.
//   - Outbox (service): effects are artifacts whose status changes are
//     commits guarded by a compare-and-set (CommitRequest.Check). A claim
//     answers a lease token (an HMAC of the claimed version under
//     Options.LeaseKey, never stored) that complete and fail must send.
//   - Preconditions: every read (GET, HEAD) evaluates If-Match, then
//     If-None-Match, against its ETag (Preconditions: 412
//     precondition-failed, 304) once it knows it has a representation, so
//     a 404 stays one; a write that lands on a branch takes If-Match as the
//     head commit it expects (parseIfMatch), and any other write refuses
//     it (route.ifMatchSupported). Each header's lines are one list. The
//     web UI's assets, which send an ETag, call Preconditions too.
//   - Network guards (netguard.go): the checks every request passes before
//     routing — nosniff, the reserve connections of LimitListener
//     (listener.go), header size, the open-mode Host check, cross-site
//     writes, query encoding, body deadlines and large-body slots.
//
// Every request body is read once, within the size limit, canonicalized
// with hashing.Canonicalize (which refuses duplicate keys, unsafe integers,
// lone surrogates and deep nesting with the exact pointer), read from the
// canonical bytes into a document (hashing.DecodeCanonical), checked
// against the route's request schema (a commit's in parts, an op at a
// time against its kind's schema: splitSchema; a schema of plain keywords
// by its schema.Fast check first, the library naming the pointers and
// rules of a refusal), then decoded into the request's struct — from the
// document for the artifact and commit writes (body.go), by json.Unmarshal
// for the others. A refused request changes nothing: writes go through
// one store commit, which the store decides before it writes anything.
package httpapi
