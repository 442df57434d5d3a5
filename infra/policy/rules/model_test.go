package rules

import (
	"reflect"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestFromPropertyMap(t *testing.T) {
	in := property.NewMap(map[string]property.Value{
		"user":     property.New("20001:20001").WithSecret(true),
		"image":    property.New(property.Computed),
		"readOnly": property.New(true),
		"memory":   property.New(256.0),
		"labels": property.New([]property.Value{property.New(map[string]property.Value{
			"label": property.New("ai-flock.role"), "value": property.New("agent"),
		})}),
		"nothing": property.New(property.Null),
		"net": property.New(property.ResourceReference{
			URN: "urn:pulumi:dev::ai-flock::docker:index/network:Network::n", ID: property.New("net-id"),
		}),
	})
	got := FromPropertyMap(in)
	want := map[string]any{
		"user":     "20001:20001",
		"image":    Unknown{},
		"readOnly": true,
		"memory":   256.0,
		"labels":   []any{map[string]any{"label": "ai-flock.role", "value": "agent"}},
		"nothing":  nil,
		"net":      "net-id",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromPropertyMap:\n got %#v\nwant %#v", got, want)
	}
	r := Resource{Props: got}
	if !isUnknown(r.get("image")) || !isUnknown(get(r.get("image"), "deeper")) {
		t.Error("an unknown value stays unknown however deep it is read")
	}
}

func TestParseUser(t *testing.T) {
	for _, c := range []struct {
		in       string
		uid, gid int
		ok       bool
	}{
		{"20001:20001", 20001, 20001, true},
		{"20001", 20001, 20001, true},
		{"0", 0, 0, true},
		{"1000:0", 1000, 0, true},
		{"root", 0, 0, false},
		{"1000:staff", 0, 0, false},
		{"", 0, 0, false},
		{"-1", 0, 0, false},
	} {
		uid, gid, ok := parseUser(c.in)
		if ok != c.ok || (ok && (uid != c.uid || gid != c.gid)) {
			t.Errorf("parseUser(%q) = %d, %d, %v", c.in, uid, gid, ok)
		}
	}
}

func TestMessage(t *testing.T) {
	r := Resource{Type: TypeContainer, Name: "flock-agent-1", URN: "urn:x"}
	v := Violation{Policy: "container-read-only-rootfs", Finding: r.finding("set readOnly: true.", "the root is writable.")}
	want := `[container-read-only-rootfs] docker:index/container:Container "flock-agent-1": the root is writable. Fix: set readOnly: true.`
	if v.Message() != want || v.URN != "urn:x" {
		t.Errorf("Message() = %q (urn %q), want %q", v.Message(), v.URN, want)
	}
}
