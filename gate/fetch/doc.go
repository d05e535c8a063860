// Package fetch performs the gate's server-side fetches: it turns a URL into
// gate.Evidence while refusing to reach any address the [Policy] forbids.
//
// This is the only part of the gate that touches the network. The classifier
// (package gate) stays pure; the HTTP API calls [Fetcher.Fetch] for a
// "perform": true request and hands the evidence to gate.Classify exactly as
// it would evidence an agent posted.
//
// # Glossary
//
//   - Policy: which address classes a fetch may connect to. The zero Policy
//     allows only global unicast addresses; AllowLoopback and AllowPrivate
//     open loopback and private ranges for tests and local development.
//     Link-local, cloud metadata, unspecified, multicast, "this network",
//     documentation and reserved addresses are never allowed.
//   - Allowed: the pure decision ([Allowed]) for one IP address: nil, or a
//     [*BlockedError] naming the class and range that refused it.
//   - Resolver: turns a host name into addresses ([Resolver]); the check runs
//     on every address it returns, after resolution, so a name that resolves
//     to 10.0.0.1 is refused like the literal.
//   - Dialer: opens the TCP connection to one checked ip:port ([DialFunc]).
//     The Fetcher's own dial step resolves, checks, dials only checked
//     addresses and checks the connection's remote address again, for the
//     first request and for every redirect; a test can inject both the
//     resolver and the dialer, so no test ever connects to a forbidden
//     address.
//   - Limits: at most MaxBodyBytes of body (default 8 MiB; a longer body is
//     cut and recorded as a transport error), Timeout for the whole exchange
//     including the body (default 15 s), MaxRedirects hops (default 10,
//     gate.MaxRedirects). A redirect loop or an eleventh hop stops the fetch
//     and is left for the classifier to name (transport.redirect_loop,
//     transport.too_many_redirects).
//   - Raw body: the fetcher asks for gzip, deflate and br itself and never
//     decompresses, so the evidence body is the bytes on the wire and the
//     classifier decodes them (and records the encoding in the receipt).
//
// The client never uses a proxy from the environment: a proxy would make the
// address checks meaningless.
package fetch
