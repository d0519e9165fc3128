package server

import (
	"github.com/blueline-app/blueline/storage"
)

type ctxKey int

const (
	apiKeyKey ctxKey = iota
)

func newRequestID() string { return storage.NewID("req_") }
