package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The gateway probes: what an agent gets when it calls the model gateway,
// its CONNECT proxy, or floods it.

// anthropicBody is a Messages API request for model.
func anthropicBody(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":64,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, model, stream)
}

// httpCall: probe http URL MODEL [stream]: POST a Messages request with a
// dummy key, as a stock SDK would; prints the status and body; exit 0 on 2xx.
func httpCall(url, model string, stream bool) {
	status, body, err := post(http.DefaultClient, url, model, stream)
	if err != nil {
		fail(err)
	}
	fmt.Printf("STATUS %d\n%s\n", status, body)
	if status/100 != 2 {
		os.Exit(1)
	}
	os.Exit(0)
}

// get: probe get URL; prints the status and the body (1 MiB at most);
// exit 0 on a 2xx.
func get(url string) {
	c := &http.Client{Timeout: 15 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("STATUS %d\n%s\n", resp.StatusCode, b)
	if resp.StatusCode/100 != 2 {
		os.Exit(1)
	}
	os.Exit(0)
}

func post(c *http.Client, url, model string, stream bool) (int, string, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(anthropicBody(model, stream)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", "dummy-the-gateway-holds-the-key")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), nil
}

// connectVia: probe connect PROXYHOST:PORT TARGET: a CONNECT through the
// gateway; exit 0 when the tunnel opens (and prints the status line).
func connectVia(proxy, target string) {
	c, err := net.DialTimeout("tcp", proxy, 3*time.Second)
	if err != nil {
		fail(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		fail(err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("STATUS %d\n%s\n", resp.StatusCode, b)
	if resp.StatusCode != 200 {
		os.Exit(1)
	}
	os.Exit(0)
}

// connectFlood: CONNS loops, each sending CONNECT <random>.flood.example:443
// through the gateway on a new connection until SECONDS pass; prints the
// count of each status as JSON.
func connectFlood(proxy string, conns int, d time.Duration) {
	var counts tally
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var n atomic.Int64
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				target := fmt.Sprintf("h%d-%d-%d.flood.example:443", w, n.Add(1), time.Now().UnixNano())
				c, err := net.DialTimeout("tcp", proxy, 3*time.Second)
				if err != nil {
					counts.add(0, err)
					continue
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
				resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
				if err != nil {
					counts.add(0, err)
				} else {
					counts.add(resp.StatusCode, nil)
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	counts.print()
	os.Exit(0)
}

// flood: probe flood URL MODEL CONNS SECONDS: CONNS loops posting as fast as
// they can; prints the count of each status as JSON.
func flood(url, model string, conns int, d time.Duration) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, Timeout: 30 * time.Second}
	var counts tally
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				status, _, err := post(c, url, model, false)
				counts.add(status, err)
			}
		}()
	}
	wg.Wait()
	counts.print()
	os.Exit(0)
}

// latency: probe latency URL MODEL N: N calls one after another; prints the
// p50 and p99 in microseconds, and how many were not 200.
func latency(url, model string, n int) {
	c := &http.Client{Timeout: 30 * time.Second}
	var ds []time.Duration
	bad := 0
	for range n {
		start := time.Now()
		status, _, err := post(c, url, model, false)
		ds = append(ds, time.Since(start))
		if err != nil || status != 200 {
			bad++
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"p50_us": ds[len(ds)/2].Microseconds(), "p99_us": ds[len(ds)*99/100].Microseconds(), "not_ok": bad, "n": n,
	})
	os.Exit(0)
}

// race: probe race URL MODEL N: N streaming Messages calls at once; prints
// how many got each status, as JSON.
func race(url, model string, n int) {
	var counts tally
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, err := post(http.DefaultClient, url, model, true)
			counts.add(st, err)
		}()
	}
	wg.Wait()
	counts.print()
}

// tally counts calls by their status ("error" for a call that got none);
// its calls may be counted at once.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (t *tally) add(status int, err error) {
	k := strconv.Itoa(status)
	if err != nil {
		k = "error"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]int{}
	}
	t.counts[k]++
}

// print prints the count of each status as JSON, on a line.
func (t *tally) print() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]int{} // {}, not null
	}
	b, _ := json.Marshal(t.counts)
	fmt.Println(string(b))
}

// call: probe call METHOD URL BODY: one request with a dummy key as both
// SDKs send it; prints the status and the body's first KiB; exit 0 on 2xx.
func call(method, url, body string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		fail(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", "dummy-the-gateway-holds-the-key")
	req.Header.Set("Authorization", "Bearer dummy-the-gateway-holds-the-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	fmt.Printf("STATUS %d\n%s\n", resp.StatusCode, b)
	if resp.StatusCode/100 != 2 {
		os.Exit(1)
	}
}
