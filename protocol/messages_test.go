package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeTask(t *testing.T) {
	cases := []struct {
		name, body string
		field      string // "" = valid
	}{
		{"minimal echo", `{"id":"a","kind":"echo"}`, ""},
		{"exec by command", `{"v":1,"id":"a.b-c_1","command":"/flock-agent","args":["tool","sleep","1"]}`, ""},
		{"unknown fields ignored", `{"v":1,"id":"a","kind":"echo","future":{"x":1}}`, ""},
		{"timeout string", `{"id":"a","kind":"echo","timeout":"1m30s"}`, ""},
		{"timeout seconds", `{"id":"a","kind":"echo","timeout":2.5}`, ""},
		{"relative command", `{"id":"a","command":"bin/run"}`, ""},
		{"nested file", `{"id":"a","kind":"exec","command":"/x","files":{"in/a.txt":"x"},"dir":"in"}`, ""},
		{"not json", `hello`, "body"},
		{"truncated", `{"id":"a"`, "body"},
		{"array", `[1,2]`, "body"},
		{"null", `null`, "id"},
		{"wrong type", `{"id":7}`, "body"},
		{"no id", `{"kind":"echo"}`, "id"},
		{"bad id", `{"id":"../x","kind":"echo"}`, "id"},
		{"dot id", `{"id":".","kind":"echo"}`, "id"},
		{"no kind", `{"id":"a"}`, "kind"},
		{"unknown kind", `{"id":"a","kind":"rm -rf"}`, "kind"},
		{"exec without command", `{"id":"a","kind":"exec"}`, "command"},
		{"future version", `{"v":2,"id":"a","kind":"echo"}`, "v"},
		{"negative version", `{"v":-1,"id":"a","kind":"echo"}`, "v"},
		{"dir up", `{"id":"a","kind":"echo","dir":"../b"}`, "dir"},
		{"dir up inside", `{"id":"a","kind":"echo","dir":"x/../../b"}`, "dir"},
		{"dir absolute", `{"id":"a","kind":"echo","dir":"/etc"}`, "dir"},
		{"file up", `{"id":"a","kind":"echo","files":{"../../agent-2/x":"y"}}`, "files[../../agent-2/x]"},
		{"file absolute", `{"id":"a","kind":"echo","files":{"/etc/passwd":"y"}}`, "files[/etc/passwd]"},
		{"command up", `{"id":"a","command":"../../bin/sh"}`, "command"},
		{"env reserved", `{"id":"a","kind":"echo","env":{"FLOCK_TASK_ID":"x"}}`, "env"},
		{"env bad name", `{"id":"a","kind":"echo","env":{"A=B":"x"}}`, "env"},
		{"negative timeout", `{"id":"a","kind":"echo","timeout":"-1s"}`, "timeout"},
		{"huge timeout", `{"id":"a","kind":"echo","timeout":"48h"}`, "timeout"},
		{"bad timeout", `{"id":"a","kind":"echo","timeout":"soon"}`, "body"},
		{"nul arg", `{"id":"a","command":"/x","args":["a\u0000b"]}`, "args[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task, err := DecodeTask([]byte(c.body), 1<<20)
			if c.field == "" {
				if err != nil {
					t.Fatalf("rejected a valid task: %v", err)
				}
				if task.V != Version || (task.Kind != KindEcho && task.Kind != KindExec) {
					t.Fatalf("defaults not applied: %+v", task)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want an error on field %q", err, c.field)
			}
		})
	}
}

func TestDecodeTaskSizeAndSalvage(t *testing.T) {
	_, err := DecodeTask([]byte(`{"id":"a","kind":"echo","stdin":"`+strings.Repeat("x", 100)+`"}`), 64)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "over the 64-byte limit") {
		t.Fatalf("oversized: %v", err)
	}
	task, err := DecodeTask([]byte(`{"id":"keep-me","kind":"echo","args":"nope"}`), 0)
	if err == nil || task.ID != "keep-me" {
		t.Fatalf("the ID of a body with a bad field should survive for the error result: %+v %v", task, err)
	}
	if task, _ := DecodeTask([]byte(`{"id":"../../x","args":"nope"}`), 0); task.ID != "" {
		t.Fatalf("an unsafe ID must not be salvaged: %q", task.ID)
	}
}

func TestDurationJSON(t *testing.T) {
	b, _ := json.Marshal(Task{ID: "a", Timeout: Duration(90 * time.Second)})
	if !strings.Contains(string(b), `"timeout":"1m30s"`) {
		t.Fatalf("%s", b)
	}
	var task Task
	if err := json.Unmarshal(b, &task); err != nil || time.Duration(task.Timeout) != 90*time.Second {
		t.Fatalf("%v %v", task.Timeout, err)
	}
}

// FuzzDecodeTask: the decoder never panics, and whatever it accepts is safe
// to run: a usable directory name and paths that stay in the task directory.
func FuzzDecodeTask(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"id":"a","kind":"echo","stdin":"x"}`,
		`{"id":"t-1","command":"/flock-agent","args":["tool","sleep","1"],"timeout":"2s","dir":"w","files":{"w/a":"b"},"env":{"A":"b"}}`,
		`{"id":"x","kind":"exec","command":"a/../b"}`,
		`{"id":"x","kind":"echo","timeout":1e300}`,
		`{"id":"x","kind":"echo","files":{"":"y"}}`,
		`{"v":1.5}`, `[]`, `null`, `"s"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := DecodeTask(data, 64<<10)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" || fe.Problem == "" {
				t.Fatalf("error %v does not name a field and a problem", err)
			}
			return
		}
		if !ValidTaskID(task.ID) || task.ID == "." || task.ID == ".." || strings.Contains(task.ID, "/") {
			t.Fatalf("accepted unsafe id %q", task.ID)
		}
		if task.Kind != KindEcho && task.Kind != KindExec {
			t.Fatalf("accepted kind %q", task.Kind)
		}
		paths := []string{}
		if task.Dir != "" {
			paths = append(paths, task.Dir)
		}
		for p := range task.Files {
			paths = append(paths, p)
		}
		for _, p := range paths {
			if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.ContainsRune(p, 0) {
				t.Fatalf("accepted escaping path %q", p)
			}
		}
		if task.Timeout < 0 || time.Duration(task.Timeout) > MaxTaskTimeout {
			t.Fatalf("accepted timeout %v", task.Timeout)
		}
		// What is accepted survives a round trip unchanged.
		b, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeTask(b, 0)
		if err != nil || again.ID != task.ID || again.Kind != task.Kind || again.Timeout != task.Timeout {
			t.Fatalf("round trip changed %+v into %+v (%v)", task, again, err)
		}
	})
}

// Receipts go only into a requester's reply inbox: _INBOX.<user>.<token…>.
func TestIsReplyInbox(t *testing.T) {
	for subj, want := range map[string]bool{
		"_INBOX.agent-2.Ab12Cd.3": true, "_INBOX.operator.x": true,
		"_INBOX.agent-2": false, "_INBOX..x": false, "_INBOX.agent-2.": false, "_INBOX.agent-2.*": false, "_INBOX.agent-2.>": false,
		"tasks.agent-3": false, "agent.agent-2.heartbeat": false, "$JS.API.STREAM.PURGE.FLOCK_TASKS": false, "": false, "x_INBOX.a.b": false,
	} {
		if got := IsReplyInbox(subj); got != want {
			t.Errorf("IsReplyInbox(%q) = %v, want %v", subj, got, want)
		}
	}
}
