package fargate

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// What the tasks look up. On AWS every lookup of a task goes to the VPC's
// resolver, through the flock's DNS Firewall; here it goes to the engine's
// resolver (127.0.0.11 in the task's namespace), which answers only the
// replay's names and recurses nowhere. So the replay records every query a
// task sends, and every answer, by reading the loopback of the task's
// namespace (an AF_PACKET socket opened there from its pause container's
// PID), for a test to hold each name against the firewall's rules.

// Lookup is one name a task looked up.
type Lookup struct {
	Task, Family string
	Name         string // as asked, without the final dot
	Type         string // A, AAAA, SRV, ...
	// Answered: the replay's resolver answered it with records (the flock
	// needed it, so the firewall must let it through on AWS).
	Answered bool
}

var dnsServer = netip.AddrFrom4([4]byte{127, 0, 0, 11})

// dnsRecorder reads one task's loopback until closed.
type dnsRecorder struct {
	f    *os.File
	done chan struct{}
}

// recordDNS starts recording the lookups of the task whose pause container
// runs as pid.
func (c *Cluster) recordDNS(t *Task, pid int) error {
	fd, err := packetSocketIn(pid)
	if err != nil {
		return fmt.Errorf("dns recorder: %w", err)
	}
	r := &dnsRecorder{f: os.NewFile(uintptr(fd), "packet-"+t.ID), done: make(chan struct{})}
	t.dns = r
	go func() {
		defer close(r.done)
		raw, err := r.f.SyscallConn()
		if err != nil {
			return
		}
		buf := make([]byte, 65536)
		for {
			var n int
			var from unix.Sockaddr
			var rerr error
			err := raw.Read(func(fd uintptr) bool {
				n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
				return rerr != unix.EAGAIN
			})
			if err != nil {
				return // closed
			}
			if rerr != nil {
				continue
			}
			// Loopback shows each packet twice: as sent and as received.
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_OUTGOING {
				continue
			}
			c.noteDNS(t, buf[:n])
		}
	}()
	return nil
}

func (r *dnsRecorder) close() {
	if r != nil {
		r.f.Close()
		<-r.done
	}
}

// packetSocketIn opens a non-blocking AF_PACKET socket on the loopback of
// pid's network namespace (a socket stays in the namespace it was made in).
func packetSocketIn(pid int) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// This thread enters the task's namespace and is never given back
		// to the scheduler: a locked goroutine that exits ends its thread.
		runtime.LockOSThread()
		ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{-1, err}
			return
		}
		defer unix.Close(ns)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("setns: %w", err)}
			return
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			ch <- result{-1, err}
			return
		}
		// The loopback is interface 1 in every network namespace.
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: 1}); err != nil {
			unix.Close(fd)
			ch <- result{-1, fmt.Errorf("bind to lo: %w", err)}
			return
		}
		ch <- result{fd, nil}
	}()
	r := <-ch
	return r.fd, r.err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// noteDNS records a query sent to, or an answer sent by, the engine's
// resolver, from an IPv4 packet over UDP or TCP.
func (c *Cluster) noteDNS(t *Task, pkt []byte) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return
	}
	ihl := int(pkt[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(pkt[2:4]))
	if ihl < 20 || total < ihl || total > len(pkt) {
		return
	}
	src, dst := netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20]))
	if src != dnsServer && dst != dnsServer {
		return
	}
	body := pkt[ihl:total]
	var msg []byte
	switch pkt[9] {
	case unix.IPPROTO_UDP:
		if len(body) < 8 {
			return
		}
		msg = body[8:]
	case unix.IPPROTO_TCP:
		if len(body) < 20 {
			return
		}
		off := int(body[12]>>4) * 4
		if off < 20 || len(body) < off+2 {
			return
		}
		// A message in one segment, after its two-byte length.
		data := body[off:]
		if n := int(binary.BigEndian.Uint16(data)); n != len(data)-2 {
			return
		}
		msg = data[2:]
	default:
		return
	}
	var m dnsmessage.Message
	if err := m.Unpack(msg); err != nil || len(m.Questions) == 0 {
		return
	}
	q := m.Questions[0]
	name := strings.TrimSuffix(q.Name.String(), ".")
	typ := strings.TrimPrefix(q.Type.String(), "Type")
	c.dnsMu.Lock()
	defer c.dnsMu.Unlock()
	key := t.ID + " " + typ + " " + name
	l, seen := c.lookups[key]
	if !seen {
		l = &Lookup{Task: t.ID, Family: t.Def.Family, Name: name, Type: typ}
		c.lookups[key] = l
		c.lookupOrder = append(c.lookupOrder, key)
	}
	if m.Header.Response && m.Header.RCode == dnsmessage.RCodeSuccess && len(m.Answers) > 0 {
		l.Answered = true
	}
}

// Lookups are the names every task looked up so far, in the order first
// asked (one entry per task, type and name).
func (c *Cluster) Lookups() []Lookup {
	c.dnsMu.Lock()
	defer c.dnsMu.Unlock()
	out := make([]Lookup, 0, len(c.lookupOrder))
	for _, k := range c.lookupOrder {
		out = append(out, *c.lookups[k])
	}
	return out
}
