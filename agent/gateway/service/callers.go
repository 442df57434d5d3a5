package service

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/netip"
	"strings"
)

// networkCallers knows an agent by its own network (dev: one Docker network
// per agent, so a source address is proof of who calls).
type networkCallers struct {
	ids   []string
	index []int // the agent's index in the config, for errors
	nets  []netip.Prefix
}

func (n *networkCallers) add(id string, index int, p netip.Prefix) {
	n.ids, n.index, n.nets = append(n.ids, id), append(n.index, index), append(n.nets, p)
}

func (n *networkCallers) of(a netip.Addr) (string, bool) {
	for i, p := range n.nets {
		if p.Contains(a) {
			return n.ids[i], true
		}
	}
	return "", false
}

// tokenCallers knows an agent by the token its stock SDK sends as the API
// key (aws: agents share one network). Only the tokens' SHA-256 are held.
type tokenCallers struct {
	ids  []string
	sums [][32]byte
}

func (t *tokenCallers) add(id string, sum [32]byte) {
	t.ids, t.sums = append(t.ids, id), append(t.sums, sum)
}

func (t *tokenCallers) of(r *http.Request) (string, bool) {
	for _, tok := range presented(r) {
		sum := sha256.Sum256([]byte(tok))
		found := -1
		for i := range t.sums { // every one compared: the time says nothing of which
			if subtle.ConstantTimeCompare(sum[:], t.sums[i][:]) == 1 {
				found = i
			}
		}
		if found >= 0 {
			return t.ids[found], true
		}
	}
	return "", false
}

// presented are the credentials a request carries where stock clients put an
// API key: x-api-key (Anthropic), Authorization: Bearer (OpenAI, Anthropic's
// auth token), and for a CONNECT Proxy-Authorization: Basic with the token
// as the password (HTTPS_PROXY=http://agent:<token>@gateway:8080).
func presented(r *http.Request) []string {
	var out []string
	if v := r.Header.Get("X-Api-Key"); v != "" {
		out = append(out, v)
	}
	if v, ok := cutScheme(r.Header.Get("Authorization"), "Bearer"); ok {
		out = append(out, v)
	}
	if v, ok := cutScheme(r.Header.Get("Proxy-Authorization"), "Basic"); ok {
		if raw, err := base64.StdEncoding.DecodeString(v); err == nil {
			user, pass, _ := strings.Cut(string(raw), ":")
			if v := cmp.Or(pass, user); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// cutScheme returns the credentials of an "<scheme> <credentials>" header
// (the scheme's case does not matter).
func cutScheme(h, scheme string) (string, bool) {
	s, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(s, scheme) {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}
