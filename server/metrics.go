package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
)

// Metrics counts the API's requests and serves what has been counted. The
// daemon's *metrics.Metrics implements it.
type Metrics interface {
	// ObserveRequest counts a request by route: "GET /v1/messages" (the
	// route's pattern, never the raw path), "unmatched" or "preflight".
	ObserveRequest(route string, code int, d time.Duration)
	// Handler serves the metrics in Prometheus' text format.
	Handler() http.Handler
}

// Route labels of requests that reach no route.
const (
	routeUnmatched = "unmatched"
	routePreflight = "preflight"
)

// patternRouter registers handles tagged with their route's pattern, so that the
// request metrics count routes, not raw paths (which would give every file
// ID a series of its own).
type patternRouter struct {
	*httprouter.Router
}

func (r patternRouter) Handle(method, path string, h httprouter.Handle) {
	route := method + " " + path
	r.Router.Handle(method, path, func(w http.ResponseWriter, req *http.Request, ps httprouter.Params) {
		setRoute(w, route)
		h(w, req, ps)
	})
}

func (r patternRouter) GET(path string, h httprouter.Handle)    { r.Handle(http.MethodGet, path, h) }
func (r patternRouter) HEAD(path string, h httprouter.Handle)   { r.Handle(http.MethodHead, path, h) }
func (r patternRouter) POST(path string, h httprouter.Handle)   { r.Handle(http.MethodPost, path, h) }
func (r patternRouter) PUT(path string, h httprouter.Handle)    { r.Handle(http.MethodPut, path, h) }
func (r patternRouter) PATCH(path string, h httprouter.Handle)  { r.Handle(http.MethodPatch, path, h) }
func (r patternRouter) DELETE(path string, h httprouter.Handle) { r.Handle(http.MethodDelete, path, h) }

// setRoute records the route on the request's statusWriter.
func setRoute(w http.ResponseWriter, route string) {
	for {
		if sw, ok := w.(*statusWriter); ok {
			sw.route = route
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// observe counts a finished request.
func observe(m Metrics, sw *statusWriter, r *http.Request, start time.Time) {
	route := sw.route
	if route == "" {
		route = routeUnmatched
		if r.Method == http.MethodOptions {
			route = routePreflight
		}
	}
	m.ObserveRequest(route, sw.status, time.Since(start))
}
