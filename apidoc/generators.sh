#!/usr/bin/env bash
# Generates clients from apidoc/openapi.json with generators people use, and
# compiles small programs against them (apidoc/testdata/generators):
#
#   - oapi-codegen (Go): the client must build, and the program must build
#     against it, with the send body's from and to typed as required;
#   - ogen (Go): every operation must generate, and the client build;
#   - openapi-typescript: the program must type-check with tsc.
#
# oapi-codegen and openapi-typescript each have a program that must NOT
# compile (a send body without from), so that a document that stops typing
# requests right fails too. .ci/run runs this; it fails when a generator
# cannot be installed. The tools are pinned, and installed once into a cache
# folder: the Go ones with go install (the module proxy), openapi-typescript
# and typescript with npm.
set -euo pipefail
cd "$(dirname "$0")/.."

oapi_codegen=v2.8.2
oapi_runtime=v1.9.0 # the runtime module the generated Go client imports
ogen=v1.24.0
openapi_typescript=7.13.0
typescript=5.9.3

cache="${XDG_CACHE_HOME:-$HOME/.cache}/blueline-ci"
doc="$PWD/apidoc/openapi.json"
programs="$PWD/apidoc/testdata/generators"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "apidoc/generators.sh: $*" >&2; exit 1; }

# gotool NAME PACKAGE VERSION: the path of a Go tool, installed once.
gotool() {
	local gobin="$cache/$1-$3"
	if [ ! -x "$gobin/$1" ]; then
		echo "installing $1 $3 (once) into $gobin" >&2
		GOBIN="$gobin" go install "$2@$3"
	fi
	echo "$gobin/$1"
}

# gomodule DIR GO REQUIRE VERSION: a module for the generated code, its
# dependencies resolved through the module proxy.
gomodule() {
	printf 'module gencheck\n\ngo %s\n\nrequire %s %s\n' "$2" "$3" "$4" >"$1/go.mod"
	(cd "$1" && GOFLAGS=-mod=mod GOWORK=off go mod tidy)
}
export GOWORK=off

echo "-- oapi-codegen $oapi_codegen"
oapi=$(gotool oapi-codegen github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen "$oapi_codegen")
mkdir -p "$work/go/blueline"
# Default options: pruning on, as a user runs it.
"$oapi" -generate types,client -package blueline -o "$work/go/blueline/client.gen.go" "$doc"
cp -r "$programs/go/ok" "$programs/go/bad" "$work/go/"
gomodule "$work/go" 1.22 github.com/oapi-codegen/runtime "$oapi_runtime"
(
	cd "$work/go"
	go vet ./blueline ./ok
	go build -o /dev/null ./ok
	if go build -o /dev/null ./bad >bad.log 2>&1; then
		fail "oapi-codegen: a send body without from compiled: from is not typed as required"
	fi
	grep -q 'main.go:9:.*nil as string' bad.log || fail "oapi-codegen: the negative program failed for another reason: $(cat bad.log)"
)

echo "-- ogen $ogen"
# ogen refuses a document with an operation it cannot generate (unless told
# to skip them); the client it makes must build.
ogen_bin=$(gotool ogen github.com/ogen-go/ogen/cmd/ogen "$ogen")
mkdir -p "$work/ogen"
"$ogen_bin" --target "$work/ogen/api" --package api --clean "$doc"
gomodule "$work/ogen" 1.24 github.com/ogen-go/ogen "$ogen"
(cd "$work/ogen" && go build ./...)

echo "-- openapi-typescript $openapi_typescript, typescript $typescript"
npm_prefix="$cache/openapi-typescript-$openapi_typescript-typescript-$typescript"
if [ ! -x "$npm_prefix/node_modules/.bin/tsc" ] || [ ! -x "$npm_prefix/node_modules/.bin/openapi-typescript" ]; then
	echo "installing openapi-typescript and typescript (once) into $npm_prefix"
	npm install --prefix "$npm_prefix" --no-audit --no-fund --loglevel=error \
		"openapi-typescript@$openapi_typescript" "typescript@$typescript"
fi
mkdir -p "$work/ts"
"$npm_prefix/node_modules/.bin/openapi-typescript" "$doc" -o "$work/ts/schema.d.ts"
cp "$programs/ts/ok.ts" "$programs/ts/bad.ts" "$work/ts/"
tsc="$npm_prefix/node_modules/.bin/tsc"
tsflags=(--noEmit --strict --target es2020 --module commonjs)
"$tsc" "${tsflags[@]}" "$work/ts/ok.ts"
if "$tsc" "${tsflags[@]}" "$work/ts/bad.ts" >"$work/ts/bad.log" 2>&1; then
	fail "openapi-typescript: a send body without from and to type-checked"
fi
grep -q "missing the following properties.*from, to" "$work/ts/bad.log" ||
	fail "openapi-typescript: the negative program failed for another reason: $(cat "$work/ts/bad.log")"

echo "generators: ok (oapi-codegen $oapi_codegen, ogen $ogen, openapi-typescript $openapi_typescript)"
