package typedstream

// Structured runs only the structured reader, and Scan only the fallback, so
// tests can tell which of the two read a blob.
func Structured(blob []byte) (string, error) {
	b, err := decode(blob)
	return string(b), err
}

func Scan(blob []byte) (string, bool) {
	b, ok := scan(blob)
	return string(b), ok
}
