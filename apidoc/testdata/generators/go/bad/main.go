// Must NOT compile: the send body's from is required, so the generated
// type is a string, not a pointer that may be left nil.
package main

import "gencheck/blueline"

func main() {
	body := blueline.SendMessageJSONRequestBody{To: "+15551230001"}
	body.From = nil
	_ = body
}
