#!/bin/sh
# The packages' post-install script: the blueline account, the data folder,
# and systemd. A first install enables the service without starting it (edit
# the configuration first); an upgrade restarts it if it was running.
#
# dpkg runs it as `configure OLD-VERSION` (OLD-VERSION empty on a first
# install), rpm as `1` on a first install and `2` (or more) on an upgrade.
set -e

case "$1" in
configure) first=$([ -z "${2:-}" ] && echo yes || true) ;;
1) first=yes ;;
[2-9] | [1-9][0-9]*) first= ;;
*) exit 0 ;;
esac

if ! getent passwd blueline >/dev/null; then
	useradd --system --user-group --home-dir /var/lib/blueline --no-create-home \
		--shell /usr/sbin/nologin --comment "Blueline messaging daemon" blueline
fi
install -d -o blueline -g blueline -m 0750 /var/lib/blueline
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	if [ -n "$first" ]; then
		systemctl enable blueline.service >/dev/null 2>&1 || true
		echo "Blueline is installed and enabled. Edit /etc/blueline/blueline.toml, then: systemctl start blueline"
	else
		systemctl try-restart blueline.service || true
	fi
fi
exit 0
