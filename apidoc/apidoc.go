// Package apidoc holds the OpenAPI 3.1 document of Blueline's HTTP API,
// openapi.json, embedded in the binary and served at /v1/openapi.json.
//
// The document describes what the server does, read from its code: every
// route of server/routes.go, their parameters and bodies, the fields Blueline
// adds to the reference shapes, every error code per status, and the webhook
// events. The tests check each request, response and webhook delivery they
// make against it (apitest.Validator), so the document cannot drift from the
// code unnoticed: response schemas are closed (a field the server adds, or
// one it drops, fails validation) and undocumented statuses are refused.
// Error answers share one schema, so that a generated client has one error
// type; the codes each response may carry are in its x-blueline-errors.
// generators.sh (run by CI) generates clients from the document and compiles
// programs against them.
//
// openapi.json is the source: edit it by hand. Objects are defined once
// under components and used through $ref; fields Blueline adds to the
// reference's shapes say so in their descriptions. This package has no
// dependencies, so that serving the document costs the binary nothing.
package apidoc

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.json
var document []byte

// JSON returns the document, as served at /v1/openapi.json (a copy: the
// caller may keep or change it).
func JSON() []byte { return bytes.Clone(document) }
