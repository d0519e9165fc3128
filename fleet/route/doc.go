// Package route sends a fleet's line-scoped API requests to the node of
// their line (issue 27), on top of package fleet's forwarding (Node.Serve,
// Node.Forward) and line directory. It has two sides, both built by the
// daemon from what it hands over of the API (its router, server.WithCaller,
// and (*server.Server).Authenticate): package route never imports server.
//
//   - Serving (Serve): the node answers the requests other nodes forward to
//     it. Each is rebuilt as an *http.Request (method, path, query, the
//     headers of Forwarded, the body) and run through the API's router as
//     the forwarding node's verified caller: the key record travels with the
//     request (ID, label, scopes, line IDs, owner; never the secret nor its
//     hash), and the API itself applies scopes, line restrictions,
//     contact-first and the guard here, as for any request. Its request ID
//     is the entry's, so the answer's request_id is the one the client saw
//     in X-Request-Id. Rate limits are not counted again (an in-process
//     caller has none): they count at the entry.
//
//   - Entry (Entry.Handler, in front of the API's router): for the routes
//     of Routed, the local API answers first, the body kept (up to the
//     node's MaxBody; a larger one is answered locally only). When that
//     answer is a 404 whose code says the line, chat, message, outbox item
//     or file is not on this node (NotHereCodes), the request is forwarded:
//     to the node of the line it names (a from, line or line_id in the query
//     or the JSON body; a handle or ln_ ID, looked up in the directory;
//     when the line is here or nowhere, the local answer stands), else (an
//     ID alone) to each other node in turn until one answers other than
//     such a 404. A signed download URL another node signed is a 403
//     download_url_invalid here, and is treated the same way. Its answer is the client's, headers and all
//     (Idempotent-Replayed among them). A node that is down (nobody serves
//     it, or its directory entries are older than the TTL) makes its lines
//     answer 503 line_unavailable with Retry-After; an ID that no up node
//     has while a node is down is answered the same way, since it may be
//     there. A forwarded POST that times out is answered 504
//     outcome_unknown with the request ID and never tried elsewhere.
//
//   - GET /v1/lines is merged: the local answer, then each other up node's
//     (forwarded, concurrently), de-duplicated by ID. Lines whose node is
//     down are left out of the list (the Line shape has no way to say
//     "unavailable" that a client would not take for a usable line) and
//     named, by handle, in the Blueline-Lines-Unavailable header.
//
//   - Signed download URLs (/files/:id) are forwarded like any ID, when the
//     file fits in one forwarded response (MaxBody, about 960 KiB); a
//     larger one is answered with a 307 redirect to the same path and query
//     on the owning node's public URL (LineEntry.BaseURL), where its
//     signature is checked. Forwarding first keeps small files (most
//     attachments) working where the nodes cannot be reached from the
//     client; the redirect keeps large ones from passing through NATS in
//     one message, which the foundation refuses by design.
//
// Webhooks are made, listed and deleted on their line's node (routed as
// the line's other requests are), which shares them with every node
// through the control plane (package fleet/control).
//
// The entry reads the directory from KV at most once a second (a
// watch-backed cache is not built). Not done here: bodies larger than
// MaxBody (uploads are answered by the node that receives them, and a
// message may attach only files stored on its line's node); /v1/events,
// which reads the fleet's events stream on every node (package
// fleet/relay), and /v1/sandbox, the sandbox line's own.
package route
