#!/bin/sh
# Writes the configuration the packages install as /etc/blueline/blueline.toml:
# config.example.toml with the data folder at /var/lib/blueline, where the
# package creates it and the unit lets the daemon write. goreleaser runs it
# before a release; service_test.go checks what it writes.
#
#   sh packaging/linux/make-config.sh [OUT]    (default packaging/linux/blueline.toml)
set -eu
out=${1:-packaging/linux/blueline.toml}
root=$(cd "$(dirname "$0")/../.." && pwd)
from='dir = "./blueline-data"'
n=$(grep -cxF "$from" "$root/config.example.toml" || true)
if [ "$n" != 1 ]; then
	echo "make-config.sh: config.example.toml should hold the line '$from' once (it holds it $n times)" >&2
	exit 1
fi
sed 's|^dir = "\./blueline-data"$|dir = "/var/lib/blueline"|' "$root/config.example.toml" >"$out"
