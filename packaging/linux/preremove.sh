#!/bin/sh
# The packages' pre-removal script: removing the package stops and disables
# the service (an upgrade leaves it running; postinstall.sh restarts it).
#
# dpkg runs it as `remove` (or `upgrade` …), rpm as `0` on removal and `1` on
# an upgrade.
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl disable --now blueline.service >/dev/null 2>&1 || true
fi
exit 0
