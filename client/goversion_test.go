package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoVersion builds a program against the client module as a program
// on the oldest Go the module's go line names would: its language version
// is that line's, and the standard library it may use too (vet's
// stdversion check, on the module and on the program). A newer API in the
// client, or a go line raised without saying so, fails here.
func TestGoVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (1\.\d+)(\.\d+)?$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("client/go.mod has no go line")
	}
	goVersion := string(m[1])
	if goVersion != "1.23" {
		t.Errorf("client/go.mod says go %s; the README's 'The Go client' says 1.23: change both", goVersion)
	}

	prog := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(prog, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo "+goVersion+"\n\nrequire github.com/blueline-app/blueline/client v0.0.0\n\n"+
		"replace github.com/blueline-app/blueline/client => "+dir+"\n")
	write("main.go", `package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

func main() {
	ctx := context.Background()
	c := client.New(os.Getenv("BLUELINE_URL"), client.WithAPIKey(os.Getenv("BLUELINE_API_KEY")))
	item, err := c.Messages.Send(ctx, client.MessageSendParams{From: "+15550000001", To: "+15551230001", Text: "hi"})
	if errors.Is(err, client.ErrInvalidRequest) {
		return
	}
	fmt.Println(item, err)
	for m, err := range c.Messages.List(ctx, client.MessageListParams{From: "+15550000001"}) {
		if err != nil || m.Text == nil {
			break
		}
		fmt.Println(*m.Text)
	}
	for ev, err := range c.Events.Stream(ctx, client.EventStreamParams{Events: []string{api.EventMessageReceived}}) {
		fmt.Println(ev.Seq, err)
		break
	}
	_, err = client.VerifyWebhook("secret", http.Header{}, nil, 0, time.Now())
	fmt.Println(err)
}
`)
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off")
	for _, run := range []struct{ dir, args string }{
		{dir, "vet -stdversion ./..."},
		{prog, "vet -stdversion ./..."},
		{prog, "build -o " + os.DevNull + " ."},
	} {
		cmd := exec.Command("go", strings.Fields(run.args)...)
		cmd.Dir, cmd.Env = run.dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s in %s: %v\n%s", run.args, run.dir, err, out)
		}
	}
}
