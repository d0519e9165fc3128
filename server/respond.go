package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/blueline-app/blueline/api"
	"github.com/blueline-app/blueline/storage"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	apiKeyKey
)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

func newRequestID() string { return storage.NewID("req_") }

func writeJSON(w http.ResponseWriter, status int, v any) {
	// Not HTML-escaped: download URLs read "&", not "\u0026".
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Our own response types always marshal; this is a programming error.
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func newList[T any](ctx context.Context, data []T, next *string) api.List[T] {
	if data == nil {
		data = []T{}
	}
	return api.List[T]{Data: data, HasMore: next != nil, NextCursor: next, RequestID: requestID(ctx)}
}
