package client

import (
	"errors"
	"iter"

	"github.com/blueline-app/blueline/client/api"
)

// errCursorLoop stops a walk whose server answers the same cursor again.
var errCursorLoop = errors.New("blueline: the server returned the same cursor twice; stopping")

// paginate walks the pages that fetch returns, from cursor ("" for the
// first), following next_cursor until has_more is false. An error is
// yielded once, and ends the walk.
func paginate[T any](cursor string, fetch func(cursor string) (*api.List[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			page, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range page.Data {
				if !yield(item, nil) {
					return
				}
			}
			next := NextCursor(page)
			if next == "" {
				return
			}
			if next == cursor {
				var zero T
				yield(zero, errCursorLoop)
				return
			}
			cursor = next
		}
	}
}

// NextCursor is the cursor of the page after page, "" when page is the last.
func NextCursor[T any](page *api.List[T]) string {
	if page == nil || !page.HasMore || page.NextCursor == nil {
		return ""
	}
	return *page.NextCursor
}
