package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OutputStream is the JetStream stream that holds every pattern's output
// records and the dead letters. Its duplicate window de-duplicates records
// re-published after a failover (they carry their deterministic id as the
// message id).
const (
	OutputStream       = "CEP_OUT"
	OutputSubjectRoot  = "cep.out."
	DeadLetterRoot     = "cep.deadletter."
	OutputDuplicateWin = 30 * time.Minute
)

// StartEmbeddedNATS starts an in-process NATS server with JetStream,
// storing under dir, listening on host:port (port -1 picks a free one).
func StartEmbeddedNATS(dir, host string, port int, logger *slog.Logger) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "cep-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		MaxPayload: 8 << 20,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if logger != nil {
		s.SetLoggerV2(natsLogger{logger}, false, false, false)
	}
	s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats: not ready after 15s")
	}
	return s, nil
}

type natsLogger struct{ l *slog.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn(fmt.Sprintf(format, v...)) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Debugf(format string, v ...any)  {}
func (n natsLogger) Tracef(format string, v ...any)  {}

// SourceStreamName is the stream the cluster creates for a source.
func SourceStreamName(source string) string {
	return "CEP_SRC_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(source))
}

// SourceConfig is the stream of a source: publishers send to
// "<source>.<key token>", and the stream's subject transform stores each
// message under "<source>.<key group>.<key token>", with the key group
// computed by NATS's partition() (FNV-1a of the token, modulo K) — the
// same hash the cluster uses (snapshot.KeyGroup), so a shard leader reads
// exactly its key groups with filter subjects.
func SourceConfig(source string, keyGroups int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      SourceStreamName(source),
		Subjects:  []string{source + ".*"},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy,
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      source + ".*",
			Destination: source + ".{{partition(" + strconv.Itoa(keyGroups) + ",1)}}.{{wildcard(1)}}",
		},
	}
}

// EnsureSourceStream creates the source's stream, or checks an existing one.
func EnsureSourceStream(ctx context.Context, js jetstream.JetStream, source string, keyGroups int) (string, error) {
	cfg := SourceConfig(source, keyGroups)
	_, err := js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			return "", err
		}
		info := st.CachedInfo()
		if info.Config.SubjectTransform == nil || info.Config.SubjectTransform.Destination != cfg.SubjectTransform.Destination {
			return "", fmt.Errorf("stream %s exists but is not partitioned into %d key groups", cfg.Name, keyGroups)
		}
		return cfg.Name, nil
	}
	if err != nil {
		return "", err
	}
	return cfg.Name, nil
}

// EnsureOutputStream creates the output stream if it is missing.
func EnsureOutputStream(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       OutputStream,
		Subjects:   []string{OutputSubjectRoot + ">", DeadLetterRoot + ">"},
		Storage:    jetstream.FileStorage,
		Duplicates: OutputDuplicateWin,
	})
	return err
}

// keyGroupOf parses the key group from a stored source subject
// "<source>.<kg>.<token>".
func keyGroupOf(subject string) (int, bool) {
	parts := strings.SplitN(subject, ".", 3)
	if len(parts) < 3 {
		return 0, false
	}
	kg, err := strconv.Atoi(parts[1])
	return kg, err == nil
}

// filterSubjects lists the stored subjects of a key-group range; none (the
// whole stream) when the range is every key group: a filter that differs
// from the stream's subject makes the server match it against every stored
// subject for each message, which costs more than the rest of the read.
func filterSubjects(source string, first, last, groups int) []string {
	if first == 0 && last == groups-1 {
		return nil
	}
	out := make([]string, 0, last-first+1)
	for kg := first; kg <= last; kg++ {
		out = append(out, source+"."+strconv.Itoa(kg)+".*")
	}
	return out
}

// connect dials NATS with reconnects forever (the cluster outlives NATS
// restarts).
func dialNATS(url, creds string, name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	return nats.Connect(url, opts...)
}
