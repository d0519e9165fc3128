package api

// BlockedContact is a contact on a line's blocked list: its messages are
// stored without events, and the line sends it nothing.
type BlockedContact struct {
	Handle    string `json:"handle"`
	LineID    string `json:"line_id"`
	CreatedAt int64  `json:"created_at"`
	// RequestID is set on the answer to a single contact's request.
	RequestID string `json:"request_id,omitempty"`
}

// OptedOutContact is a contact that opted out of a line's messages by
// texting one of its opt-out keywords: the line sends it nothing (403
// contact_opted_out) until it texts an opt-in keyword.
type OptedOutContact struct {
	Handle     string `json:"handle"`
	LineID     string `json:"line_id"`
	OptedOutAt int64  `json:"opted_out_at"`
	// Word is the message that opted it out, as the contact wrote it
	// (trimmed); nil for an opt-out stored before the word was kept.
	Word *string `json:"word"`
}

// UnblockedContact answers DELETE /v1/contacts/blocked/{handle}.
type UnblockedContact struct {
	Handle    string `json:"handle"`
	LineID    string `json:"line_id"`
	Deleted   bool   `json:"deleted"`
	RequestID string `json:"request_id"`
}

// BlockedImport answers POST /v1/contacts/blocked.csv: how many of the
// file's handles were added to the list (Added, those not on it before),
// how many it holds that are valid (Blocked, on the list now), and the
// rows refused.
type BlockedImport struct {
	Added     int           `json:"added"`
	Blocked   int           `json:"blocked"`
	Rejected  []RejectedRow `json:"rejected"`
	RequestID string        `json:"request_id"`
}

// RejectedRow is a row of an imported CSV file that holds no valid
// handle: its number in the file (the header is row 1), its value, and
// why.
type RejectedRow struct {
	Row     int    `json:"row"`
	Value   string `json:"value"`
	Message string `json:"message"`
}
