package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
)

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestCheckRefusesEveryPrivatePlaceAndItsDisguises(t *testing.T) {
	pool := netip.MustParsePrefix("203.0.113.0/24") // the flock's pool, public here to prove it is refused as such
	g := New(nil, pool)
	for _, a := range []string{
		"127.0.0.1", "10.1.2.3", "172.20.0.5", "192.168.1.1", "100.64.0.1", "169.254.169.254", "169.254.170.2",
		"0.0.0.0", "0.1.2.3", "224.0.0.1", "255.255.255.255", "::1", "::", "fc00::1", "fd12::1", "fe80::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1",
		"203.0.113.9", "::ffff:203.0.113.9",
	} {
		err := g.Check("x.example", netip.MustParseAddr(a), nil)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%s: not refused (%v)", a, err)
		}
	}
	for _, a := range []string{"1.1.1.1", "140.82.112.3", "2606:4700::1111"} {
		if err := g.Check("x.example", netip.MustParseAddr(a), nil); err != nil {
			t.Errorf("%s: refused: %v", a, err)
		}
	}
	// A rule may name a range explicitly.
	if err := g.Check("reg.internal", netip.MustParseAddr("10.9.0.4"), []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}); err != nil {
		t.Errorf("a named range is refused: %v", err)
	}
}

func TestDialRefusesANameWithOnePrivateAddressBeforeDialingAny(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	g := New(fakeResolver{
		"rebind.example": addrs("1.1.1.1", "127.0.0.1"),
		"meta.example":   addrs("169.254.169.254"),
		"local.example":  addrs("127.0.0.1"),
	})
	for _, host := range []string{"rebind.example", "meta.example", "local.example", "127.0.0.1", "::ffff:127.0.0.1"} {
		_, err := g.Dial(context.Background(), host, port, nil)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%s: dial not refused: %v", host, err)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a refused dial reached the listener")
	default:
	}
	// Named explicitly, loopback is dialed: the guard is what refused it.
	c, err := g.Dial(context.Background(), "local.example", port, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	if err != nil {
		t.Fatalf("dial with the range named: %v", err)
	}
	c.Close()
	<-accepted
}

func TestControlHookRefusesWhatTheCheckDidNotSee(t *testing.T) {
	// The Control hook is the last word: a name the dialer itself resolves
	// (localhost, past the resolution check) is checked on the address the
	// socket is about to connect to.
	g := New(fakeResolver{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = g.dialer("localhost", nil).Dial("tcp", net.JoinHostPort("localhost", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
	var re *RefusedError
	if !errors.As(err, &re) || !re.Addr.IsLoopback() {
		t.Fatalf("err = %v", err)
	}
}
