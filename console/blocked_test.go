package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/daemontest"
)

// The blocked contacts page: the first line's list, a contact blocked and
// unblocked through its forms, a bad handle refused on the page; the
// line's opted-out contacts.
func TestBlockedContactsPage(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	csrf := b.csrf()
	// html/template writes a handle's + as &#43;.
	shown := func(h string) string { return "&#43;" + strings.TrimPrefix(h, "+") }

	a := b.do("GET", "/dashboard/blocked", nil)
	if a.status != 200 || !strings.Contains(a.body, "No blocked contacts on <bdi>"+shown(mainLine)+"</bdi>") || strings.Contains(a.body, shown(daemontest.SandboxLine)) {
		t.Fatalf("the empty page: %d %s", a.status, a.body)
	}
	a = b.do("POST", "/dashboard/blocked", url.Values{"csrf": {csrf}, "line": {mainLine}, "handle": {"+1 (555) 111-0001"}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("block: %d %s", a.status, a.body)
	}
	a = b.do("GET", a.header.Get("Location"), nil)
	if a.status != 200 || !strings.Contains(a.body, `<tr data-handle="`+shown(alice)+`">`) || !strings.Contains(a.body, "The contact is blocked") {
		t.Fatalf("after blocking: %d %s", a.status, a.body)
	}
	a = b.do("POST", "/dashboard/blocked", url.Values{"csrf": {csrf}, "line": {mainLine}, "handle": {"not a handle"}})
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "is not a handle") {
		t.Errorf("a bad handle: %d %s", a.status, a.body)
	}
	a = b.do("POST", "/dashboard/blocked/remove", url.Values{"csrf": {csrf}, "line": {mainLine}, "handle": {alice}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("unblock: %d %s", a.status, a.body)
	}
	if a = b.do("GET", a.header.Get("Location"), nil); strings.Contains(a.body, `data-handle="`+shown(alice)+`"`) || !strings.Contains(a.body, "no longer blocked") {
		t.Errorf("after unblocking: %d %s", a.status, a.body)
	}
	a = b.do("POST", "/dashboard/blocked/remove", url.Values{"csrf": {csrf}, "line": {mainLine}, "handle": {alice}})
	if a.status != http.StatusNotFound || !strings.Contains(a.body, "is not blocked") {
		t.Errorf("unblock again: %d %s", a.status, a.body)
	}
	// A contact who texted STOP is listed under Opted out, with its word.
	if !strings.Contains(a.body, "No contact opted out of <bdi>"+shown(mainLine)+"</bdi>") {
		t.Errorf("the empty opted-out table: %s", a.body)
	}
	e.d.Inbound(mainLine, daemontest.Bob, "Arrêt")
	a = b.do("GET", "/dashboard/blocked?line="+url.QueryEscape(mainLine), nil)
	if _, optedOut, _ := strings.Cut(a.body, `<table id="opted-out">`); !strings.Contains(optedOut, `<tr data-handle="`+shown(daemontest.Bob)+`">`) ||
		!strings.Contains(optedOut, "<bdi>Arrêt</bdi>") {
		t.Errorf("the opted-out table: %s", a.body)
	}
	// A form without its token is refused.
	if a := b.do("POST", "/dashboard/blocked", url.Values{"line": {mainLine}, "handle": {alice}}); a.status != http.StatusForbidden {
		t.Errorf("block without the CSRF token: %d", a.status)
	}
}
