package server

import (
	"slices"
	"strconv"
	"strings"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// What wakes an agent: an agent key's event streams and webhooks take, by
// default, only live messages of chats Messages files in the inbox
// (known, unfiltered senders), and only what its sender gating admits;
// each may ask for catch-up news and filtered chats too. Other keys take
// every message, as before.

// arrivals are the arrivals a receiver may ask for.
var arrivals = []string{api.ArrivalLive, api.ArrivalCatchUp}

// wakeFor is what wakes a receiver created by key: the arrivals it asked
// for (none: the key's default), whether it asked for filtered chats (nil:
// the key's default), and the key's sender gating, which it cannot widen.
func wakeFor(key storage.Key, asked []string, includeFiltered *bool, param string) (storage.Wake, error) {
	w := storage.Wake{Gate: key.Gate}
	for _, a := range asked {
		switch {
		case a == "history":
			return w, httpapi.Invalid(param, "History (old messages the network writes again) raises no events: %s may be %s.",
				param, strings.Join(arrivals, ", "))
		case !slices.Contains(arrivals, a):
			return w, httpapi.Invalid(param, "Unknown arrival %q; arrivals are %s.", a, strings.Join(arrivals, ", "))
		case !slices.Contains(w.Arrivals, a):
			w.Arrivals = append(w.Arrivals, a)
		}
	}
	if len(w.Arrivals) == 0 && key.Agent {
		w.Arrivals = []string{api.ArrivalLive}
	}
	if len(w.Arrivals) == len(arrivals) {
		w.Arrivals = nil // every one
	}
	w.SkipFiltered = key.Agent
	if includeFiltered != nil {
		w.SkipFiltered = !*includeFiltered
	}
	return w, nil
}

// streamWake is the wake of an event stream: its query's arrival
// (repeated or comma-separated) and include_filtered.
func streamWake(key storage.Key, q map[string][]string) (storage.Wake, error) {
	var include *bool
	if v := q["include_filtered"]; len(v) > 0 {
		b, err := strconv.ParseBool(v[len(v)-1])
		if err != nil {
			return storage.Wake{}, httpapi.Invalid("include_filtered", "include_filtered must be true or false.")
		}
		include = &b
	}
	return wakeFor(key, splitValues(q["arrival"]), include, "arrival")
}

// webhookWake is the wake of a webhook being created: its body's arrival
// (an array) and include_filtered.
func webhookWake(key storage.Key, b body) (storage.Wake, error) {
	asked, err := b.strings("arrival")
	if err != nil {
		return storage.Wake{}, err
	}
	var include *bool
	if raw, ok := b["include_filtered"]; ok && string(raw) != "null" {
		v, err := b.bool("include_filtered")
		if err != nil {
			return storage.Wake{}, err
		}
		include = &v
	}
	return wakeFor(key, asked, include, "arrival")
}

// wakeArrivals are the arrivals a wake takes, as the API shows them.
func wakeArrivals(w storage.Wake) []string {
	if len(w.Arrivals) == 0 {
		return slices.Clone(arrivals)
	}
	return slices.Clone(w.Arrivals)
}
