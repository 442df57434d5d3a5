package worker

import (
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{"AGENT_ID": "agent-7", "CONCURRENCY": "4", "HEARTBEAT_INTERVAL": "5s", "ENV_ALLOW": "PATH, LC_*"}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "agent-7" || c.Concurrency != 4 || c.Heartbeat != 5*time.Second || c.SharedDir != "/shared" ||
		c.NkeyFile != "/etc/flock/creds/nats.nk" || c.LogFile != "/shared/logs/agent-7.log" || strings.Join(c.EnvAllow, ",") != "PATH,LC_*" ||
		c.Grace != DefaultGrace || c.TaskTimeout != DefaultTaskTimeout || c.StatusFile != DefaultStatusFile {
		t.Fatalf("%+v", c)
	}
	bad := map[string]string{"AGENT_ID": "Agent 1", "CONCURRENCY": "zero", "HEARTBEAT_INTERVAL": "5", "SHARED_DIR": "rel", "ENV_ALLOW": "FLOCK_X", "LOG_LEVEL": "loud"}
	_, err = FromEnv(func(k string) string { return bad[k] })
	for _, name := range []string{"AGENT_ID", "CONCURRENCY", "HEARTBEAT_INTERVAL", "SHARED_DIR", "ENV_ALLOW", "LOG_LEVEL"} {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestAllowedEnv(t *testing.T) {
	got := allowedEnv([]string{"PATH", "LC_*"}, []string{"PATH=/bin", "LC_ALL=C", "LANG=x", "NATS_SECRET=s", "FLOCK_X=1", "PATHOLOGY=1"})
	if strings.Join(got, " ") != "PATH=/bin LC_ALL=C" {
		t.Fatalf("%v", got)
	}
	// The gateway's variables reach tasks and the program whatever the
	// allow-list says (FLOCK_GATEWAY_URL despite the FLOCK_ prefix; the
	// SDK's key, which the stack fills with a placeholder or the agent's
	// gateway token, so a stock SDK in a task calls); an allow-list of
	// nothing still drops the rest.
	got = allowedEnv(nil, []string{"FLOCK_GATEWAY_URL=http://10.0.0.6:8080", "ANTHROPIC_BASE_URL=http://10.0.0.6:8080/anthropic", "ANTHROPIC_API_KEY=flock-gateway-holds-the-key", "AWS_SECRET_ACCESS_KEY=x", "HTTPS_PROXY=http://g", "FLOCK_NKEY_SEED=S", "PATH=/bin"})
	if strings.Join(got, " ") != "FLOCK_GATEWAY_URL=http://10.0.0.6:8080 ANTHROPIC_BASE_URL=http://10.0.0.6:8080/anthropic ANTHROPIC_API_KEY=flock-gateway-holds-the-key HTTPS_PROXY=http://g" {
		t.Fatalf("gateway variables: %v", got)
	}
}

func TestProgramFromEnv(t *testing.T) {
	env := map[string]string{"AGENT_ID": "agent-1", "AGENT_PROGRAM": `["/shared/common/bin/my-agent", "--model", "claude"]`}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || strings.Join(c.Program, "|") != "/shared/common/bin/my-agent|--model|claude" {
		t.Fatalf("program %q, err %v", c.Program, err)
	}
	for value, rule := range map[string]string{
		`/bin/agent --x`:   "want a JSON array",
		`[]`:               "want a JSON array",
		`["bin/my-agent"]`: "must be an absolute path",
	} {
		env["AGENT_PROGRAM"] = value
		_, err := FromEnv(func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), "AGENT_PROGRAM: ") || !strings.Contains(err.Error(), rule) {
			t.Errorf("AGENT_PROGRAM=%s: %v, want %q", value, err, rule)
		}
	}
}

// With its seed in the environment (Fargate) the agent writes the seed
// beside its status file: a status file in the shared directory (EFS on
// aws, which outlives the task) is refused, naming the variable.
func TestStatusFileWithSeedStaysOutOfTheSharedDir(t *testing.T) {
	env := map[string]string{"AGENT_ID": "agent-1", "NATS_NKEY_SEED": "SUAEXAMPLE", "STATUS_FILE": "/shared/agents/agent-1/.flock-agent.status"}
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "STATUS_FILE: must not be under SHARED_DIR") {
		t.Fatalf("status file on the shared directory with a seed in the environment: %v", err)
	}
	env["STATUS_FILE"] = "/run/flock-agent.status"
	if _, err := FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("status file on /run: %v", err)
	}
	// With the key in a file, the agent writes no key beside its status.
	delete(env, "NATS_NKEY_SEED")
	env["STATUS_FILE"] = "/shared/agents/agent-1/.flock-agent.status"
	if _, err := FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("status file on the shared directory with a key file: %v", err)
	}
}

// BOARD switches the board's run tasks on (the default) or off; any other
// value is refused, naming the variable.
func TestBoardFromEnv(t *testing.T) {
	env := map[string]string{"AGENT_ID": "agent-1"}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || c.NoBoard || c.BoardPoll != DefaultBoardPoll {
		t.Fatalf("default: no board %v, poll %s, err %v", c.NoBoard, c.BoardPoll, err)
	}
	for v, off := range map[string]bool{"on": false, "ON": false, "off": true, " Off ": true} {
		env["BOARD"] = v
		if c, err := FromEnv(func(k string) string { return env[k] }); err != nil || c.NoBoard != off {
			t.Errorf("BOARD=%q: no board %v, err %v", v, c.NoBoard, err)
		}
	}
	env["BOARD"], env["BOARD_POLL"] = "maybe", "1ms"
	_, err = FromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), `BOARD: want on or off`) || !strings.Contains(err.Error(), `"maybe"`) || !strings.Contains(err.Error(), "BOARD_POLL: must be between") {
		t.Fatalf("bad BOARD and BOARD_POLL: %v", err)
	}
}
