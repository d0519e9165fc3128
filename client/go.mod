module github.com/blueline-app/blueline/client

// The oldest Go a program using the client needs (range-over-func
// iterators): the daemon's module may need a newer one. TestGoVersion
// checks that nothing in the module needs more.
go 1.23
