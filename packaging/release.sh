#!/usr/bin/env bash
# Builds a release of Blueline into packaging/dist, publishing nothing:
#
#   bash packaging/release.sh VERSION     # e.g. 1.2.3 or 1.2.3-rc.1
#   bash packaging/release.sh --snapshot  # what CI builds: version 0.0.0-snapshot
#
# - blueline_VERSION_{darwin,linux}_{arm64,amd64}.tar.gz, each binary stamped
#   with the version (`blueline version`);
# - blueline_VERSION_{amd64,arm64}.deb and blueline-VERSION-1.{x86_64,aarch64}.rpm,
#   with the systemd unit and the blueline account (packaging/linux);
# - checksums.txt (SHA-256 of all of the above);
# - homebrew/Formula/blueline.rb, the tap's formula (packaging/homebrew/blueline.rb
#   with the macOS archives' URLs, as a GitHub release of tag vVERSION will
#   serve them, and checksums);
# - release-notes.md, CHANGELOG.md's entry for VERSION.
#
# A VERSION needs its entry in CHANGELOG.md (a "## VERSION" heading): this
# script checks that there is one and refuses to build without it, since
# only a person can say what changed. It also needs a clean work tree, so
# that what is built is a commit. --snapshot needs neither.
#
# The network it uses is the Go module proxy: goreleaser builds with `go
# build`, and is itself installed with `go install`, at a pinned version,
# into a cache folder on the first run (@latest needs a newer Go than the
# one go.mod names).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "packaging/release.sh: $*" >&2; exit 1; }

case "${1:-}" in
--snapshot) version=0.0.0-snapshot snapshot=1 ;;
"" | -*) die "usage: packaging/release.sh VERSION (such as 1.2.3), or --snapshot" ;;
*) version=${1#v} snapshot= ;;
esac
[ $# -eq 1 ] || die "usage: packaging/release.sh VERSION (such as 1.2.3), or --snapshot"
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
	die "version $version: want MAJOR.MINOR.PATCH, with an optional -PRERELEASE (such as 1.2.3 or 1.2.3-rc.1)"

# notes prints CHANGELOG.md's entry for $version: the lines under its
# "## $version" heading, up to the next "## " heading.
notes() {
	awk -v v="$version" '
		/^## / { on = ($2 == v || $2 == "[" v "]"); next }
		on' CHANGELOG.md
}
if [ -z "$snapshot" ]; then
	if ! grep -q '[^[:space:]]' <(notes); then
		die "CHANGELOG.md has no entry for $version: add a \"## $version — $(date -u +%F)\" heading (the \"## Unreleased\" one, renamed) with what changed, commit it, and run again"
	fi
	if [ -n "$(git status --porcelain)" ]; then
		die "the work tree has changes: commit them (or stash them) first, so that the release is a commit"
	fi
fi

goreleaser_version=v2.16.0
gobin="${XDG_CACHE_HOME:-$HOME/.cache}/blueline-ci/goreleaser-$goreleaser_version"
goreleaser="$gobin/goreleaser"
if [ ! -x "$goreleaser" ]; then
	echo "installing goreleaser $goreleaser_version (once) into $gobin"
	GOBIN="$gobin" go install "github.com/goreleaser/goreleaser/v2@$goreleaser_version"
fi

# The configuration is valid and uses nothing deprecated.
"$goreleaser" check
# Always a snapshot to goreleaser: no tag needed and nothing published.
# .goreleaser.yaml takes the version from BLUELINE_VERSION.
BLUELINE_VERSION=$version "$goreleaser" release --snapshot --clean

dist=packaging/dist
for f in "blueline_${version}_darwin_arm64.tar.gz" "blueline_${version}_darwin_amd64.tar.gz" \
	"blueline_${version}_linux_arm64.tar.gz" "blueline_${version}_linux_amd64.tar.gz" checksums.txt; do
	[ -f "$dist/$f" ] || die "goreleaser wrote no $dist/$f"
done

# sha256 prints the checksum checksums.txt holds for the file $1.
sha256() {
	local sum
	sum=$(awk -v f="$1" '$2 == f { print $1 }' "$dist/checksums.txt")
	[[ $sum =~ ^[0-9a-f]{64}$ ]] || die "checksums.txt has no SHA-256 for $1"
	echo "$sum"
}
base="https://github.com/blueline-app/blueline/releases/download/v$version"
mkdir -p "$dist/homebrew/Formula"
sed -e "s|@VERSION@|$version|" \
	-e "s|@URL_DARWIN_ARM64@|$base/blueline_${version}_darwin_arm64.tar.gz|" \
	-e "s|@SHA256_DARWIN_ARM64@|$(sha256 "blueline_${version}_darwin_arm64.tar.gz")|" \
	-e "s|@URL_DARWIN_AMD64@|$base/blueline_${version}_darwin_amd64.tar.gz|" \
	-e "s|@SHA256_DARWIN_AMD64@|$(sha256 "blueline_${version}_darwin_amd64.tar.gz")|" \
	packaging/homebrew/blueline.rb >"$dist/homebrew/Formula/blueline.rb"
if grep -n '@[A-Z0-9_]*@' "$dist/homebrew/Formula/blueline.rb" >&2; then
	die "the formula keeps a field release.sh does not fill in (above)"
fi

if [ -z "$snapshot" ]; then
	notes | sed '/[^[:space:]]/,$!d' >"$dist/release-notes.md"
fi

echo "packaging/release.sh: Blueline $version in $dist:"
(cd "$dist" && ls -1 -- *.tar.gz *.deb *.rpm checksums.txt homebrew/Formula/blueline.rb $([ -z "$snapshot" ] && echo release-notes.md))
