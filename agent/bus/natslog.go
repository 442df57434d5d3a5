package bus

import (
	"fmt"
	"log/slog"
)

// natsLogger sends the server's log to slog.
type natsLogger struct{ log *slog.Logger }

func (l *natsLogger) Noticef(f string, v ...any) { l.log.Info(fmt.Sprintf(f, v...)) }
func (l *natsLogger) Warnf(f string, v ...any)   { l.log.Warn(fmt.Sprintf(f, v...)) }
func (l *natsLogger) Fatalf(f string, v ...any)  { l.log.Error(fmt.Sprintf(f, v...), "fatal", true) }
func (l *natsLogger) Errorf(f string, v ...any)  { l.log.Error(fmt.Sprintf(f, v...)) }
func (l *natsLogger) Debugf(f string, v ...any)  { l.log.Debug(fmt.Sprintf(f, v...)) }
func (l *natsLogger) Tracef(f string, v ...any)  {}
