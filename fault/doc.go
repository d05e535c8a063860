// Package fault is artifactd's one error vocabulary: an Error carries a
// Code from a closed set, a Detail safe to show to a client, the JSON
// pointers of the fields it is about, and the wrapped cause.
//
// It is a leaf package — it imports nothing of artifactd — so that the
// pure core (graph, replay), the store and its storage seam can mark their
// corruption sentinels with the one marker, ErrCorrupt, and every layer
// above can test for it with errors.Is. The classification of the other
// sentinels of store, graph, replay, gate and store/kv into a Code lives
// one layer up, in service.Classify, because it must import them; the
// mapping of a Code to an HTTP status and an RFC 9457 problem lives once
// in the HTTP door (httpapi.StatusOf and its problem+json writer), whose
// statuses the browser UI and the MCP server use too.
//
// # Glossary
//
//   - Code: the last part of a problem type URI
//     ("urn:artifactd:problem:" + code); a closed set listed by Codes.
//   - Detail: a sentence naming only what the client sent (ids, refs,
//     pointers), never internal state; internal errors get a generic one
//     at the door.
//   - FieldError: one pointer (into a request body) or parameter (of a
//     query, path or header) with the rule it broke.
//   - Extra: problem extension members (tainted_by, head, cycle…).
//   - Corruption: any error for which errors.Is(err, ErrCorrupt) holds —
//     a stored record that does not verify. Sentinels made with
//     Corruption keep their own message and identity.
package fault
