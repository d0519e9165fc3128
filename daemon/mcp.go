package daemon

import (
	"errors"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/httpapi"
)

// clientError is a refusal of the API server as the API's client returns
// it, so that the MCP tools tell an agent of it as of any API error, a wait
// to respect included.
func clientError(err error) error {
	e, ok := errors.AsType[*httpapi.Error](err)
	if !ok {
		return err
	}
	return &client.Error{Status: e.Status, Type: e.Type, Code: e.Code, Message: e.Message, Param: e.Param,
		RetryAfter: time.Duration(e.RetryAfter) * time.Second}
}
