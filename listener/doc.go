// Package listener holds the API's listeners: plain or HTTPS with automatic
// certificates (certmagic), connection limits, idle bodies. It knows
// nothing of the API it carries: the API tells it which requests have
// authenticated (Authenticated) or are made in process (InProcess), and
// answers the bodies it cuts off itself (BodyIdleTimeout's stalled).
package listener
