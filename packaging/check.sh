#!/usr/bin/env bash
# Builds the snapshot release (packaging/release.sh --snapshot: every archive,
# package and the Homebrew formula, publishing nothing) and checks it:
#
# - the linux/amd64 binary says its version;
# - the .deb holds the unit, the configuration (a conffile) and the data
#   folder; then it is installed on this machine (dpkg -i), the installed
#   /usr/bin/blueline serves its packaged configuration as the blueline
#   account until /healthz answers, and the package is purged, leaving no
#   file of its own behind;
# - the .rpm holds the same files (when `rpm` can be had);
# - the formula is valid Ruby, and its URLs and checksums are those of the
#   macOS archives built;
# - release.sh refuses a version CHANGELOG.md has no entry for.
#
# .ci/run runs it. It installs what it lacks with apt (ruby, rpm), as root or
# with sudo, and so needs a Debian-like machine; installing the .deb is
# skipped, with a line saying why, where a blueline package, account or
# /var/lib/blueline already exists.
set -euo pipefail
cd "$(dirname "$0")/.."

dist=packaging/dist
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
fail() { echo "packaging/check.sh: $*" >&2; exit 1; }
apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		$sudo apt-get update -qq && apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

echo "== release.sh refuses a version without a CHANGELOG.md entry"
if out=$(bash packaging/release.sh 0.0.0-not-in-changelog 2>&1); then
	fail "release.sh built a version CHANGELOG.md has no entry for"
fi
grep -q 'CHANGELOG.md has no entry for 0.0.0-not-in-changelog' <<<"$out" || fail "release.sh said: $out"

echo "== the snapshot release"
bash packaging/release.sh --snapshot
version=0.0.0-snapshot

echo "== the version stamped in"
got=$(tar -xzOf "$dist/blueline_${version}_linux_amd64.tar.gz" blueline >"$dist/blueline-check" &&
	chmod +x "$dist/blueline-check" && "$dist/blueline-check" version)
rm -f "$dist/blueline-check"
[[ $got == "blueline $version (commit "* ]] || fail "the linux/amd64 binary says \"$got\", want blueline $version (commit …)"

echo "== the .deb's contents"
deb=$(ls "$dist"/blueline_*_amd64.deb)
contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/blueline ./usr/lib/systemd/system/blueline.service ./etc/blueline/blueline.toml ./var/lib/blueline/; do
	grep -q " $path\$" <<<"$contents" || fail "$deb lacks $path"
done
grep -qx /etc/blueline/blueline.toml <(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) || fail "$deb: the configuration is not a conffile"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/blueline.service | cmp -s - packaging/linux/blueline.service ||
	fail "$deb: its unit is not packaging/linux/blueline.service"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./etc/blueline/blueline.toml | grep -qx 'dir = "/var/lib/blueline"' ||
	fail "$deb: its configuration does not keep the data in /var/lib/blueline"

echo "== the .deb, installed"
# installed_deb installs the .deb, serves with it and purges it. On a failure
# its trap stops the daemon and takes away all the check made, so that the
# next run starts again from a machine without Blueline.
installed_deb() {
	local tmp pid="" addr="" health="" deadline
	tmp=$(mktemp -d)
	cleanup() {
		if [ -n "$pid" ]; then $sudo kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
		pid=""
		$sudo dpkg --purge blueline >/dev/null 2>&1 || true
		if getent passwd blueline >/dev/null; then $sudo userdel blueline; fi
		$sudo rm -rf /var/lib/blueline "$tmp"
	}
	trap cleanup EXIT

	$sudo dpkg -i "$deb" >/dev/null
	getent passwd blueline | grep -q ':/var/lib/blueline:/usr/sbin/nologin$' || fail "dpkg -i made no blueline system account"
	[ "$(stat -c %U:%a /var/lib/blueline)" = blueline:750 ] || fail "/var/lib/blueline is $(stat -c %U:%a /var/lib/blueline), want blueline:750"
	/usr/bin/blueline version | grep -q "^blueline $version " || fail "the installed blueline says: $(/usr/bin/blueline version)"

	# The packaged configuration, served by the installed binary as the
	# service's account, on a free port instead of 8080 (systemd may not run
	# here, so this starts it directly).
	chmod 0755 "$tmp"
	sed 's|^listen = "127.0.0.1:8080"$|listen = "127.0.0.1:0"|' /etc/blueline/blueline.toml >"$tmp/blueline.toml"
	grep -qx 'listen = "127.0.0.1:0"' "$tmp/blueline.toml" || fail "the packaged configuration does not listen on 127.0.0.1:8080"
	chmod 0644 "$tmp/blueline.toml"
	$sudo setpriv --reuid=blueline --regid=blueline --init-groups /usr/bin/blueline serve --config "$tmp/blueline.toml" >"$tmp/log" 2>&1 &
	pid=$!
	deadline=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$pid" 2>/dev/null; do
		addr=${addr:-$(sed -n 's/.* listen=\(127\.0\.0\.1:[0-9]*\) .*/\1/p' "$tmp/log")}
		if [ -n "$addr" ] && health=$(curl -fsS "http://$addr/healthz" 2>/dev/null); then
			break
		fi
		sleep 0.1 # between polls; the deadline above bounds the wait
	done
	if [ -z "$health" ]; then
		cat "$tmp/log" >&2
		fail "the installed blueline did not answer /healthz (its log is above)"
	fi
	[ "$(stat -c %U /var/lib/blueline/db.bolt)" = blueline ] || fail "the daemon's database in /var/lib/blueline is not the blueline account's"
	$sudo kill "$pid"
	wait "$pid" || fail "the installed blueline did not stop cleanly on SIGTERM (exit status $?): $(cat "$tmp/log")"
	pid=""
	echo "installed /usr/bin/blueline served /healthz on $addr: $health"

	$sudo dpkg --purge blueline >/dev/null
	for path in /usr/bin/blueline /usr/lib/systemd/system/blueline.service /etc/blueline /usr/share/doc/blueline; do
		[ ! -e "$path" ] || fail "dpkg --purge left $path"
	done
	# What the package keeps on purpose (packaging/README.md): the data and
	# the account. This check made them, so the trap removes them.
	[ -f /var/lib/blueline/db.bolt ] || fail "dpkg --purge removed /var/lib/blueline/db.bolt: the messages and keys"
	getent passwd blueline >/dev/null || fail "dpkg --purge removed the blueline account, which owns the data"
	echo "dpkg --purge removed the package's files and kept the data and the account (which this check now removes)"
	cleanup
	trap - EXIT
}
if dpkg -s blueline >/dev/null 2>&1 || getent passwd blueline >/dev/null || [ -e /var/lib/blueline ]; then
	echo "skipped: this machine already has a blueline package, account or /var/lib/blueline, which this check would change"
else
	installed_deb
fi

echo "== the .rpm's contents"
rpm=$(ls "$dist"/blueline-*.x86_64.rpm)
if ! command -v rpm >/dev/null 2>&1; then
	apt_install rpm || true
fi
if command -v rpm >/dev/null 2>&1; then
	contents=$(rpm -qlp "$rpm" 2>/dev/null)
	for path in /usr/bin/blueline /usr/lib/systemd/system/blueline.service /etc/blueline/blueline.toml /var/lib/blueline; do
		grep -qx "$path" <<<"$contents" || fail "$rpm lacks $path"
	done
	grep -qx /etc/blueline/blueline.toml <(rpm -qcp "$rpm" 2>/dev/null) || fail "$rpm: the configuration is not a %config file"
	grep -q 'useradd --system' <(rpm -qp --scripts "$rpm" 2>/dev/null) || fail "$rpm: its scripts do not create the blueline account"
	echo "$rpm: ok"
else
	echo "skipped: no rpm command (apt-get install rpm failed), the .rpm's contents are not checked"
fi

echo "== the Homebrew formula"
formula="$dist/homebrew/Formula/blueline.rb"
if ! command -v ruby >/dev/null 2>&1; then
	apt_install ruby
fi
ruby -c "$formula" >/dev/null || fail "$formula is not valid Ruby"
for arch in arm64 amd64; do
	file="blueline_${version}_darwin_$arch.tar.gz"
	sum=$(awk -v f="$file" '$2 == f { print $1 }' "$dist/checksums.txt")
	[ "$(sha256sum "$dist/$file" | cut -d' ' -f1)" = "$sum" ] || fail "checksums.txt does not hold the SHA-256 of $file"
	# Each url line is followed by the sha256 of that file.
	grep -A1 -F "url \"https://github.com/blueline-app/blueline/releases/download/v$version/$file\"" "$formula" |
		grep -qx "      sha256 \"$sum\"" || fail "$formula: no url of $file followed by its sha256 $sum"
done
grep -q 'linux' <(grep -E '^\s*url ' "$formula") && fail "$formula: the formula is for macOS only"
grep -q 'name macos: "app.blueline.daemon"' "$formula" || fail "$formula: its service is not the LaunchAgent app.blueline.daemon"

echo "packaging: ok ($(ls "$dist" | grep -cE '\.(deb|rpm|tar\.gz)$') packages and the formula in $dist)"
