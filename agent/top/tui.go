package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// Options of a dashboard run.
type Options struct {
	Every time.Duration // between looks at what the bus keeps, and redraws; 1 s when not above 0
	Lines int           // log lines to ask an agent for (protocol.LogsKeepLines when 0)
	In    io.Reader
	Out   io.Writer
	// Once prints one frame, after listening for Every, and returns: for
	// scripts and for a terminal that is not one.
	Once bool
}

type (
	itemMsg   operator.Item
	budgetMsg protocol.LedgerEntry
	lookMsg   Look
	logsMsg   Logs
	tickMsg   time.Time
	errMsg    struct{ err error }
)

// Run shows the dashboard until the user quits or ctx ends.
func Run(ctx context.Context, src Source, o Options) error {
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Once {
		return once(ctx, src, o)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &model{ctx: ctx, src: src, o: o, s: NewState(), sc: Screen{Sort: Sorts[0]}}
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out), tea.WithAltScreen())
	go func() {
		err := src.Watch(ctx,
			func(it operator.Item) { p.Send(itemMsg(it)) },
			func(e protocol.LedgerEntry) { p.Send(budgetMsg(e)) }, nil)
		if err != nil && ctx.Err() == nil {
			p.Send(errMsg{err})
		}
	}()
	go func() {
		first := true
		for {
			p.Send(lookMsg(src.Look(ctx, first)))
			first = false
			select {
			case <-ctx.Done():
				return
			case <-time.After(o.Every):
			}
		}
	}()
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if m.err != nil {
		return m.err
	}
	return err
}

// once listens for one period, looks once, and prints one frame.
func once(ctx context.Context, src Source, o Options) error {
	s := NewState()
	items := make(chan func(), 4096)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		errs <- src.Watch(wctx,
			func(it operator.Item) { items <- func() { s.Take(it, time.Now()) } },
			func(e protocol.LedgerEntry) { items <- func() { s.TakeBudget(e, time.Now()) } },
			func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-errs:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
	s.Apply(src.Look(ctx, true), time.Now())
	deadline := time.After(o.Every)
	for done := false; !done; {
		select {
		case f := <-items:
			f()
		case <-deadline:
			done = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	stop()
	_, err := io.WriteString(o.Out, Render(s, Screen{Sort: Sorts[0], Width: 160, Height: 1000}, time.Now()))
	return err
}

type model struct {
	ctx context.Context
	src Source
	o   Options
	s   *State
	sc  Screen
	err error
}

func (m *model) Init() tea.Cmd { return tick(m.o.Every) }

func tick(d time.Duration) tea.Cmd {
	return tea.Tick(d, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	now := time.Now()
	switch msg := msg.(type) {
	case itemMsg:
		m.s.Take(operator.Item(msg), now)
	case budgetMsg:
		m.s.TakeBudget(protocol.LedgerEntry(msg), now)
	case lookMsg:
		m.s.Apply(Look(msg), now)
		m.keepSelection(now)
	case logsMsg:
		l := Logs(msg)
		if m.sc.Logs != nil && m.sc.Logs.Agent == l.Agent {
			m.sc.Logs = &l
		}
	case tickMsg:
		return m, tick(m.o.Every)
	case errMsg:
		m.err = msg.err
		return m, tea.Quit
	case tea.WindowSizeMsg:
		m.sc.Width, m.sc.Height = msg.Width, msg.Height
	case tea.KeyMsg:
		return m, m.key(msg, now)
	}
	return m, nil
}

// key is what a key press does: in the filter prompt, typing; over the
// logs, going back or reloading; over the table, the rest.
func (m *model) key(k tea.KeyMsg, now time.Time) tea.Cmd {
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste {
		// Keys typed faster than the terminal is read come as one burst:
		// each is a key of its own ("/agent-3" is / then a filter).
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}}, now))
		}
		return tea.Batch(cmds...)
	}
	if k.String() == "ctrl+c" {
		return tea.Quit
	}
	if m.sc.Filtering {
		switch k.Type {
		case tea.KeyEnter:
			m.sc.Filtering = false
		case tea.KeyEsc:
			m.sc.Filtering, m.sc.Filter = false, ""
		case tea.KeyBackspace:
			if r := []rune(m.sc.Filter); len(r) > 0 {
				m.sc.Filter = string(r[:len(r)-1])
			}
		case tea.KeyRunes, tea.KeySpace:
			m.sc.Filter += string(k.Runes)
		}
		m.keepSelection(now)
		return nil
	}
	if m.sc.Logs != nil {
		switch k.String() {
		case "q":
			return tea.Quit
		case "esc", "backspace", "left", "h":
			m.sc.Logs = nil
		case "r":
			return m.askLogs(m.sc.Logs.Agent)
		}
		return nil
	}
	switch k.String() {
	case "q":
		return tea.Quit
	case "s":
		for i, s := range Sorts {
			if s == m.sc.Sort {
				m.sc.Sort = Sorts[(i+1)%len(Sorts)]
				break
			}
		}
	case "/":
		m.sc.Filtering = true
	case "esc":
		m.sc.Filter = ""
	case "up", "k":
		m.move(-1, now)
	case "down", "j":
		m.move(1, now)
	case "enter", "l", "right":
		if m.sc.Selected != "" {
			return m.askLogs(m.sc.Selected)
		}
	}
	return nil
}

// move puts the cursor on the row by rows below (or above) it.
func (m *model) move(by int, now time.Time) {
	rows := m.s.Rows(m.sc.Sort, m.sc.Filter, now)
	if len(rows) == 0 {
		return
	}
	at := 0
	for i, a := range rows {
		if a.ID == m.sc.Selected {
			at = i + by
		}
	}
	m.sc.Selected = rows[min(max(at, 0), len(rows)-1)].ID
}

// keepSelection keeps the cursor on a shown row.
func (m *model) keepSelection(now time.Time) {
	rows := m.s.Rows(m.sc.Sort, m.sc.Filter, now)
	for _, a := range rows {
		if a.ID == m.sc.Selected {
			return
		}
	}
	m.sc.Selected = ""
	if len(rows) > 0 {
		m.sc.Selected = rows[0].ID
	}
}

// askLogs opens the logs view and asks the agent, off the UI's loop.
func (m *model) askLogs(id string) tea.Cmd {
	m.sc.Logs = &Logs{Agent: id, At: time.Now(), Err: "asking " + id + " …"}
	ctx, lines, src := m.ctx, m.o.Lines, m.src
	return func() tea.Msg {
		rep, err := src.Logs(ctx, id, lines)
		l := Logs{Agent: id, At: time.Now(), Lines: rep.Lines, Truncated: rep.Truncated}
		if err != nil {
			l.Err = fmt.Sprintf("no log lines: %v", err)
		}
		return logsMsg(l)
	}
}

func (m *model) View() string { return Render(m.s, m.sc, time.Now()) }
