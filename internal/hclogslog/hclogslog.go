// Package hclogslog adapts log/slog to hclog, the logger of hashicorp's
// libraries (raft, its transports), so that they log through the node's
// slog handler with their levels and key/value pairs intact.
package hclogslog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hclogAdapter is an hclog.Logger that writes to a *slog.Logger, so that
// hashicorp libraries log through the node's slog handler. Derived loggers
// (With, Named) share the level set by SetLevel.
type hclogAdapter struct {
	base    *slog.Logger // with implied args applied
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level; NoLevel defers to the slog handler
	repeats *repeats      // shared by the process's adapters
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// New adapts logger to hclog.Logger (nil discards).
func New(logger *slog.Logger) hclog.Logger {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &hclogAdapter{base: logger, level: new(atomic.Int32), repeats: processRepeats}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default: // Info, NoLevel
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	if floor := hclog.Level(a.level.Load()); floor != hclog.NoLevel && l < floor {
		return false
	}
	return a.base.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level > hclog.Debug && benign(msg, args) {
		level = hclog.Debug
	}
	if level == hclog.Off || !a.enabled(level) {
		return
	}
	ok, extra := a.repeats.admit(level, msg, args)
	if !ok {
		return
	}
	args = formatArgs(args)
	if extra != nil {
		args = append(args[:len(args):len(args)], extra...)
	}
	if a.name != "" {
		args = append([]any{"logger", a.name}, args...)
	}
	a.base.Log(context.Background(), slogLevel(level), msg, args...)
}

// benign reports a message raft logs as an error that is none: a
// periodic snapshot check that finds nothing applied since the last
// snapshot (a restarted replica with a low --raft-snapshot-threshold
// logs it at every check until its first new entry).
func benign(msg string, args []any) bool {
	if msg != "failed to take snapshot" {
		return false
	}
	for _, v := range args {
		if err, ok := v.(error); ok && errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return true
		}
	}
	return false
}

// formatArgs renders the values hclog formats itself (hclog.Fmt, Hex,
// Octal, Binary, Quote) as hclog does, so that raft's
// "servers", hclog.Fmt("%+v", ...) reads as the servers, not as a slice
// of a format and its operands. Other values pass as they are; args is
// not modified.
func formatArgs(args []any) []any {
	var out []any
	for i := 1; i < len(args); i += 2 {
		v, ok := formatValue(args[i])
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

func formatValue(v any) (string, bool) {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) == 0 {
			return "", true
		}
		if f, ok := v[0].(string); ok {
			return fmt.Sprintf(f, v[1:]...), true
		}
		return fmt.Sprint(v...), true
	case hclog.Hex:
		return "0x" + strconv.FormatUint(uint64(v), 16), true
	case hclog.Octal:
		return "0" + strconv.FormatUint(uint64(v), 8), true
	case hclog.Binary:
		return "0b" + strconv.FormatUint(uint64(v), 2), true
	case hclog.Quote:
		return strconv.Quote(string(v)), true
	}
	return "", false
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.implied }
func (a *hclogAdapter) Name() string                  { return a.name }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.base = a.base.With(formatArgs(args)...)
	c.implied = append(a.implied[:len(a.implied):len(a.implied)], args...)
	return &c
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

func (a *hclogAdapter) GetLevel() hclog.Level {
	if l := hclog.Level(a.level.Load()); l != hclog.NoLevel {
		return l
	}
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return stdWriter{a: a, level: level}
}

// stdWriter logs each Write as one message at a fixed level.
type stdWriter struct {
	a     *hclogAdapter
	level hclog.Level
}

func (w stdWriter) Write(p []byte) (int, error) {
	w.a.Log(w.level, strings.TrimRight(string(p), "\r\n"))
	return len(p), nil
}
