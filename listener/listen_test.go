package listener

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A port in use, or a low port without the privilege, names the address
// once and says what to do; a low port's hint is about low ports.
func TestError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	_, inUse := net.Listen("tcp", addr)
	if inUse == nil {
		t.Fatal("listening twice on one port succeeded")
	}
	denied := func(address string) error {
		a, _ := net.ResolveTCPAddr("tcp", address)
		return &net.OpError{Op: "listen", Net: "tcp", Addr: a, Err: os.NewSyscallError("bind", syscall.EACCES)}
	}
	cases := []struct {
		address string
		err     error
		want    []string
		notWant []string
	}{
		{addr, inUse, []string{"listen on " + addr + ": address already in use: another program", "set [server] listen to another port"}, nil},
		{"127.0.0.1:80", denied("127.0.0.1:80"), []string{"listen on 127.0.0.1:80: permission denied: ports below 1024 need root", "set [server] listen to a port from 1024 up"}, nil},
		{"127.0.0.1:8080", denied("127.0.0.1:8080"), []string{"listen on 127.0.0.1:8080: permission denied: this user may not listen there"}, []string{"below 1024"}},
	}
	for _, c := range cases {
		msg := Error("[server] listen", c.address, c.err).Error()
		if strings.Count(msg, c.address) != 1 {
			t.Errorf("%s: the address is not named once: %q", c.address, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q does not contain %q", msg, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(msg, w) {
				t.Errorf("%q contains %q", msg, w)
			}
		}
	}
}

// The TLS listeners' errors name their own settings, with the same hints.
func TestListenTLSNamesItsSetting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, c := range []struct {
		setting string
		opts    TLSOptions
	}{
		{"[tls] https_listen", TLSOptions{Domains: []string{"x.test"}, HTTPSListen: addr, HTTPListen: "127.0.0.1:0"}},
		{"[tls] http_listen", TLSOptions{Domains: []string{"x.test"}, HTTPSListen: "127.0.0.1:0", HTTPListen: addr}},
	} {
		_, err := ListenTLS(c.opts, nil)
		if err == nil || !strings.Contains(err.Error(), "listen on "+addr+": address already in use") || !strings.Contains(err.Error(), "set "+c.setting+" to another port") {
			t.Errorf("%s taken: %v", c.setting, err)
		}
	}
}
