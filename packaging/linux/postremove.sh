#!/bin/sh
# The .deb's postrm. Even a purge keeps the data folder and the account:
# they hold the messages and the API keys.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
	echo "Kept /var/lib/blueline and the blueline account: remove them yourself (rm -r /var/lib/blueline; userdel blueline) if you want them gone."
fi
exit 0
