package bus

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"
)

// Probe reports whether a NATS server answers on addr (host:port) with its
// INFO line within timeout. It needs no credentials: the server sends INFO
// to every new connection before authentication.
func Probe(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReaderSize(conn, 4096).ReadString('\n')
	if err != nil && !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("no INFO from %s: %w", addr, err)
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("%s did not answer like NATS (got %.40q)", addr, line)
	}
	return nil
}
