#!/bin/sh
# The .deb's postinst: the blueline account, the data folder, and systemd.
# A first install enables the service without starting it (edit the
# configuration first); an upgrade restarts it if it was running.
set -e

if [ "$1" = configure ]; then
	if ! getent passwd blueline >/dev/null; then
		useradd --system --user-group --home-dir /var/lib/blueline --no-create-home \
			--shell /usr/sbin/nologin --comment "Blueline messaging daemon" blueline
	fi
	install -d -o blueline -g blueline -m 0750 /var/lib/blueline
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null || true
		if [ -z "$2" ]; then
			systemctl enable blueline.service >/dev/null 2>&1 || true
			echo "Blueline is installed and enabled. Edit /etc/blueline/blueline.toml, then: systemctl start blueline"
		else
			systemctl try-restart blueline.service || true
		fi
	fi
fi
exit 0
