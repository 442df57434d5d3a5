package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ai-flock/ai-flock/protocol"
)

// A message is taken when the agent's work says it has it: `flock-agent
// inbox ack` or the MCP tool inbox_ack moves its file from the inbox
// directory to inbox/taken/. Until then it is untaken, and the runtime
// never deletes it: pruning (INBOX_KEEP) removes taken files only, oldest
// first. So that no sender can fill the inbox directory for the others,
// the runtime keeps at most protocol.InboxPerSender untaken messages of one
// sender (as the bus vouched for it): past that, the sender's mail waits in
// the mailbox (its share there is protocol.MailPerSender), and then the bus
// refuses the sender, naming the bound. The operator's share is its own.

// TakenDir is where taken messages go, inside the inbox directory.
const TakenDir = "taken"

// ErrNotInInbox: no untaken message of that ID or file.
var ErrNotInInbox = errors.New("not in the inbox")

// TakeMessage moves one untaken message, named by its file (as a receipt or
// read_inbox gives it, with or without "inbox/") or its message ID, from
// inboxDir to inboxDir/taken/, and returns its new file relative to the
// agent's directory (inbox/taken/<name>). Taking a taken message again is
// not an error: its file is returned.
func TakeMessage(inboxDir, ref string) (string, error) {
	ref = strings.TrimPrefix(strings.TrimPrefix(ref, "inbox/"), TakenDir+"/")
	switch {
	case ref == "":
		return "", errors.New("id: required (a message ID or its file, as read_inbox gives it)")
	case strings.ContainsAny(ref, `/\`) || ref == "." || ref == "..":
		return "", fmt.Errorf("id: %q: a message ID or a file name of the inbox directory, without a path", ref)
	}
	taken := filepath.Join(inboxDir, TakenDir)
	rel := func(name string) string { return filepath.Join("inbox", TakenDir, name) }
	name := ref
	if !strings.HasSuffix(ref, ".json") {
		if !protocol.ValidTaskID(ref) {
			return "", fmt.Errorf("id: %q: not a message ID (1 to 128 letters, digits, '.', '_' or '-') nor a .json file", ref)
		}
		names, err := filesOf(inboxDir, ref)
		if err != nil {
			return "", err
		}
		switch len(names) {
		case 0:
			if done, _ := filesOf(taken, ref); len(done) > 0 {
				return rel(done[len(done)-1]), nil
			}
			return "", fmt.Errorf("id: %w: no untaken message %s", ErrNotInInbox, ref)
		case 1:
			name = names[0]
		default:
			return "", fmt.Errorf("id: %d untaken messages have the ID %s (from different senders): name the file (%s)", len(names), ref, strings.Join(names, ", "))
		}
	}
	if err := os.MkdirAll(taken, 0o700); err != nil {
		return "", fmt.Errorf("inbox: %w", err)
	}
	if err := os.Rename(filepath.Join(inboxDir, name), filepath.Join(taken, name)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(taken, name)); serr == nil {
				return rel(name), nil
			}
			return "", fmt.Errorf("id: %w: no untaken message file %s", ErrNotInInbox, name)
		}
		return "", fmt.Errorf("inbox: %w", err)
	}
	return rel(name), nil
}

// filesOf names the message files of dir with that message ID, sorted.
func filesOf(dir, id string) ([]string, error) {
	var names []string
	for _, kind := range []string{"inbox", "broadcast"} {
		m, err := filepath.Glob(filepath.Join(dir, "*-"+kind+"-"+id+".json"))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names)
	return names, nil
}

// untaken counts each sender's untaken messages in the inbox directory. It
// reads the directory each time (the agent's work moves or deletes files
// as it likes) and remembers each file's sender, so a file is read once.
type untaken struct {
	mu   sync.Mutex
	dir  string
	from map[string]string // file name -> sender
}

func newUntaken(dir string) *untaken { return &untaken{dir: dir, from: map[string]string{}} }

// count is how many untaken messages of sender the directory holds.
func (u *untaken) count(sender string) int {
	entries, err := os.ReadDir(u.dir)
	if err != nil {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	seen := make(map[string]string, len(entries))
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") {
			continue
		}
		from, ok := u.from[name]
		if !ok {
			var st struct {
				From string `json:"from"`
			}
			b, err := os.ReadFile(filepath.Join(u.dir, name))
			if err != nil {
				continue // moved meanwhile
			}
			_ = json.Unmarshal(b, &st) // a file that is not a message counts for nobody
			from = st.From
		}
		seen[name] = from
		if from == sender {
			n++
		}
	}
	u.from = seen // forget files no longer there
	return n
}

// note records the sender of a file the runtime has just written.
func (u *untaken) note(name, sender string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.from[name] = sender
}
