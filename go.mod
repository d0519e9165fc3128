module github.com/blueline-app/blueline

go 1.26.8

require (
	github.com/julienschmidt/httprouter v1.3.0
	github.com/pelletier/go-toml/v2 v2.4.3
	go.etcd.io/bbolt v1.5.0
	golang.org/x/time v0.16.0
)

require golang.org/x/sys v0.45.0 // indirect
