#!/usr/bin/env bash
# Checks the release configuration without publishing anything: goreleaser
# validates .goreleaser.yaml, then builds a snapshot release (binaries,
# archives, the .deb, the Homebrew cask) into packaging/dist, and the .deb is
# checked for the unit, the configuration and the data folder. .ci/run runs it.
#
# goreleaser is installed with `go install` at a pinned version, into a cache
# folder, on the first run. (@latest needs a newer Go than the one go.mod
# names, and fails to fetch a dependency through the module proxy.)
set -euo pipefail
cd "$(dirname "$0")/.."

version=v2.16.0
gobin="${XDG_CACHE_HOME:-$HOME/.cache}/blueline-ci/goreleaser-$version"
goreleaser="$gobin/goreleaser"
if [ ! -x "$goreleaser" ]; then
	echo "installing goreleaser $version (once) into $gobin"
	GOBIN="$gobin" go install "github.com/goreleaser/goreleaser/v2@$version"
fi

"$goreleaser" check
# --snapshot: no tag needed, nothing published, no validation of the tree.
"$goreleaser" release --snapshot --clean

dist=packaging/dist
deb=$(ls "$dist"/blueline_*_amd64.deb)
fail() { echo "packaging/check.sh: $deb: $*" >&2; exit 1; }
if command -v dpkg-deb >/dev/null; then
	contents=$(dpkg-deb -c "$deb")
	for path in ./usr/bin/blueline ./usr/lib/systemd/system/blueline.service ./etc/blueline/blueline.toml ./var/lib/blueline/; do
		grep -q " $path\$" <<<"$contents" || fail "lacks $path"
	done
	grep -qx /etc/blueline/blueline.toml <(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) || fail "the configuration is not a conffile"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/blueline.service | cmp -s - packaging/linux/blueline.service ||
		fail "its unit is not packaging/linux/blueline.service"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./etc/blueline/blueline.toml | grep -qx 'dir = "/var/lib/blueline"' ||
		fail "its configuration does not keep the data in /var/lib/blueline"
else
	echo "no dpkg-deb: the .deb's contents are not checked"
fi
[ -f "$dist/homebrew/Casks/blueline.rb" ] || fail "no Homebrew cask was written"
if grep -q linux "$dist/homebrew/Casks/blueline.rb"; then
	echo "packaging/check.sh: the Homebrew cask should be for macOS only" >&2
	exit 1
fi
echo "packaging: ok ($(ls "$dist" | grep -cE '\.(deb|tar\.gz)$') packages in $dist)"
