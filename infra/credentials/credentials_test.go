package credentials

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestGatewayToken(t *testing.T) {
	master := []byte(strings.Repeat("m", MinSecretLen))
	one, err := GatewayToken(master, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := GatewayToken(master, "agent-1")
	two, _ := GatewayToken(master, "agent-2")
	other, _ := GatewayToken([]byte(strings.Repeat("n", MinSecretLen)), "agent-1")
	if one != again || len(one) != 64 || one == two || one == other {
		t.Errorf("tokens: %s, again %s, agent-2 %s, other master %s: want deterministic, 64 hex digits, per agent and per master", one, again, two, other)
	}
	if _, err := hex.DecodeString(one); err != nil {
		t.Errorf("not hex: %v", err)
	}
	// Its own label: not the HMAC an nkey of the same user is derived from.
	mac := hmac.New(sha256.New, master)
	mac.Write([]byte("ai-flock/nats-user/v1/agent/agent-1")) // Derive(master, protocol.AgentUser("agent-1"))
	if hex.EncodeToString(mac.Sum(nil)) == one {
		t.Error("the gateway token is the nkey derivation")
	}
	if _, err := GatewayToken(master[:MinSecretLen-1], "agent-1"); err == nil {
		t.Error("a short master secret was accepted")
	}
	if _, err := GatewayToken(master, ""); err == nil {
		t.Error("an empty agent ID was accepted")
	}
}
