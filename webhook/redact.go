package webhook

import "net/url"

// RedactURL is how logs show a webhook's URL: its scheme and host, with the
// port, never its path or query, which often carry a credential of the
// receiver's (a token, a channel's secret), nor a user name or password.
// Only the operator's `blueline webhooks list` and the API show it whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	return u.Scheme + "://" + u.Host
}
