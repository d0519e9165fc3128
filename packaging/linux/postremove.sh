#!/bin/sh
# The packages' post-removal script. Even a purge keeps the data folder and
# the account: they hold the messages and the API keys.
#
# dpkg runs it as `remove`, then `purge` when purging; rpm as `0` on removal
# (rpm has no purge) and `1` on an upgrade.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
case "$1" in
purge | 0)
	echo "Kept /var/lib/blueline and the blueline account: remove them yourself (rm -r /var/lib/blueline; userdel blueline) if you want them gone."
	;;
esac
exit 0
