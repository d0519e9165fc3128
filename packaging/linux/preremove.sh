#!/bin/sh
# The .deb's prerm: removing the package stops and disables the service (an
# upgrade leaves it running; postinstall.sh restarts it).
set -e

if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl disable --now blueline.service >/dev/null 2>&1 || true
fi
exit 0
