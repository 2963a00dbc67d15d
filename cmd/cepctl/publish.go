package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/dustin/go-humanize"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa/expr"
)

type publishOptions struct {
	globalOptions
	// Source is the source to publish to: its key expression, and the
	// subject prefix "Source.".
	Source string
	// File is the input of JSON lines; "-" is stdin.
	File string
	// NATSURL overrides the cluster's NATS URL (ClusterSummary.nats_url).
	NATSURL string
	// Key overrides the source's key expression.
	Key string
	// MaxPending bounds the publishes awaiting their JetStream ack.
	MaxPending int
	// AckWait bounds the wait for acks: at the end of the input, and while
	// no ack arrives with MaxPending publishes outstanding.
	AckWait time.Duration
	// NATSAuth is who to be on NATS; none given: the publisher user the
	// cluster hands out for its embedded server (GetPublishAccess).
	NATSAuth natsAuth
}

const (
	defaultMaxPending = 4096
	// maxReportedLines bounds the bad lines described on stderr and listed
	// in the error.
	maxReportedLines = 20
	// progressEvery is the progress line's refresh interval (10 a second).
	progressEvery = 100 * time.Millisecond
)

func newPublishCmd(d *deps, runF func(*publishOptions) error) *cobra.Command {
	opts := &publishOptions{}
	cmd := &cobra.Command{
		Use:   "publish --source SOURCE [-f FILE|-]",
		Short: "Publish JSON events to a source's JetStream subjects",
		Long: `Publish events, one JSON object per line, to a source. Each event's
partition key is the source's key expression (or --key) evaluated over the
event, and the event is published to the JetStream subject
"SOURCE.<key token>", where the token is the key in the cluster's token
encoding: the bytes A-Z a-z 0-9 _ - as they are, every other byte
(including . * > % spaces and each byte of a non-ASCII character) as %XX in
upper-case hex, and the empty key as "%". The NATS URL is the one the
cluster reports unless --nats is given.

Without --nats-creds or --nats-user, cepctl asks the cluster for its
publisher user (which may publish events and nothing else) and uses it on
the cluster's NATS; an external NATS takes credentials of its own, like
the nats CLI: --nats-creds FILE, or --nats-user NAME with the password in
$NATS_PASSWORD or --nats-password-file (never on the command line).

Publishing is asynchronous with up to --max-pending events awaiting their
ack. Lines that are not JSON objects or whose key cannot be computed are
skipped and reported by line number at the end, and the command then exits
non-zero, as it does when any event was not stored. A progress line is shown
on standard error when it is a terminal.`,
		Example: `  cepctl publish --source logins -f events.jsonl
  gen-events | cepctl publish --source orders --key e.customer.id -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Source == "" {
				return errors.New("publish: give the source with --source NAME")
			}
			if opts.MaxPending < 1 {
				return fmt.Errorf("publish: --max-pending must be at least 1, not %d", opts.MaxPending)
			}
			if opts.AckWait <= 0 {
				return fmt.Errorf("publish: --ack-wait must be positive, not %s", opts.AckWait)
			}
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			opts.NATSURL = opts.NATSAuth.fromContext(cmd, g, opts.NATSURL)
			if err := opts.NATSAuth.resolve(d); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runPublish(cmd.Context(), d, opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Source, "source", "s", "", "source to publish to (required)")
	f.StringVarP(&opts.File, "file", "f", "-", "input file of JSON lines, - for standard input")
	f.StringVar(&opts.NATSURL, "nats", "", "NATS URL (default: the one the cluster reports)")
	f.StringVar(&opts.Key, "key", "", "CEL key expression over the event e (default: the source's)")
	f.IntVar(&opts.MaxPending, "max-pending", defaultMaxPending, "publishes awaiting their ack at most")
	f.DurationVar(&opts.AckWait, "ack-wait", 30*time.Second, "how long to wait for acks before giving up")
	opts.NATSAuth.flags(cmd)
	return cmd
}

// badLine is a skipped input line.
type badLine struct {
	line int
	err  error
}

// publishResult is what a publish did; -o json/yaml print it.
type publishResult struct {
	Published       int64   `json:"published"`
	Skipped         int     `json:"skipped"`
	Failed          int64   `json:"failed"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"eventsPerSecond"`
	BadLines        []int   `json:"badLines"`
	FirstError      string  `json:"firstError,omitempty"`
}

func runPublish(ctx context.Context, d *deps, opts *publishOptions) error {
	c := newClients(d, opts.globalOptions)
	src, err := c.sources.GetSource(ctx, connect.NewRequest(&cepv1.GetSourceRequest{Name: opts.Source}))
	if err != nil {
		return err
	}
	source := src.Msg.GetSource()
	keySrc := opts.Key
	if keySrc == "" {
		keySrc = source.GetKey()
	}
	if keySrc == "" {
		return fmt.Errorf("source %s has no key expression: give one with --key EXPR", opts.Source)
	}
	if subs := source.GetSubjects(); len(subs) > 0 && !subjectsCover(subs, opts.Source) {
		return fmt.Errorf("source %s reads %s, which does not cover %s.<key>: publish to it some other way", opts.Source, strings.Join(subs, ","), opts.Source)
	}
	natsURL, auth, err := publishTarget(ctx, c, opts.NATSURL, opts.NATSAuth)
	if err != nil {
		return err
	}
	comp, err := expr.NewCompiler()
	if err != nil {
		return err
	}
	key, err := comp.Value(keySrc)
	if err != nil {
		return fmt.Errorf("key expression %q: %v", keySrc, err)
	}

	in, size, err := openInput(d, opts.File)
	if err != nil {
		return err
	}
	defer in.Close()

	nc, err := nats.Connect(natsURL, append(auth.options(), nats.Name("cepctl publish"))...)
	if err != nil {
		return fmt.Errorf("cannot connect to NATS at %s: %v", natsURL, err)
	}
	defer nc.Close()

	p := &publisher{opts: opts, key: key, prefix: opts.Source + ".", maxPayload: int(nc.MaxPayload())}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(opts.MaxPending),
		jetstream.WithPublishAsyncErrHandler(p.onAsyncError))
	if err != nil {
		return err
	}
	p.js = js

	start := time.Now()
	var stopProgress func()
	if d.isTerminal != nil && d.isTerminal(d.stderr) {
		stopProgress = startProgress(d.stderr, start, &p.sent, &p.read, size)
	}
	err = p.run(ctx, in)
	if stopProgress != nil {
		stopProgress()
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	return p.report(d, elapsed)
}

// openInput opens file ("-": stdin) and returns its size when known (else
// 0). Closing the result closes a file, not stdin. A UTF-8 byte order mark
// at the start is skipped, and UTF-16 input is refused with a hint (see
// textReader).
func openInput(d *deps, file string) (io.ReadCloser, int64, error) {
	if file == "-" {
		return inputFile{&textReader{r: d.stdin}, stdinReader{d.stdin}}, 0, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, fmt.Errorf("read input: %w", err)
	}
	var size int64
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return inputFile{&textReader{r: f}, f}, size, nil
}

// inputFile reads through a textReader and closes (or aborts) its source.
type inputFile struct {
	io.Reader
	src io.ReadCloser
}

func (f inputFile) Close() error { return f.src.Close() }

// Abort ends a read blocked on the source: stdin's Abort, or Close.
func (f inputFile) Abort() {
	if a, ok := f.src.(interface{ Abort() }); ok {
		a.Abort()
		return
	}
	f.src.Close()
}

// textReader is JSON lines as editors and shells on Windows write them: a
// UTF-8 byte order mark at the start (Notepad, PowerShell's utf8BOM) is
// skipped, where a JSON parser would stop at it ("invalid character 'ï'");
// UTF-16 (PowerShell 5's default for > and Out-File) is refused by its
// mark, with a hint, instead of as garbage on line 1.
type textReader struct {
	r     io.Reader
	begun bool
	head  []byte // the first bytes, read to look for a mark, not yet returned
}

var errUTF16 = errors.New("the input is UTF-16 (it starts with a UTF-16 byte order mark); JSON lines must be UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8")

func (t *textReader) Read(p []byte) (int, error) {
	if !t.begun {
		t.begun = true
		buf := make([]byte, 3)
		n, err := io.ReadFull(t.r, buf)
		t.head = buf[:n]
		switch {
		case bytes.HasPrefix(t.head, []byte{0xEF, 0xBB, 0xBF}):
			t.head = nil
		case bytes.HasPrefix(t.head, []byte{0xFF, 0xFE}), bytes.HasPrefix(t.head, []byte{0xFE, 0xFF}):
			return 0, errUTF16
		}
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return 0, err
		}
	}
	if len(t.head) > 0 {
		n := copy(p, t.head)
		t.head = t.head[n:]
		return n, nil
	}
	return t.r.Read(p)
}

// stdinReader is stdin as an input: Close does not close it, but Abort
// does when it can be closed, to end a Read blocked on a pipe or terminal.
type stdinReader struct{ io.Reader }

func (stdinReader) Close() error { return nil }

func (r stdinReader) Abort() {
	if c, ok := r.Reader.(io.Closer); ok {
		c.Close()
	}
}

// subjectsCover reports whether a source reading subjects receives every
// subject "source.<token>".
func subjectsCover(subjects []string, source string) bool {
	target := append(strings.Split(source, "."), "") // "" stands for any token
	for _, s := range subjects {
		f := strings.Split(s, ".")
		ok := len(f) <= len(target)
		for i := 0; ok && i < len(f); i++ {
			switch {
			case f[i] == ">":
				ok = i == len(f)-1
				if ok {
					return true
				}
			case f[i] == "*":
			case target[i] == "" || f[i] != target[i]:
				ok = false
			}
		}
		if ok && len(f) == len(target) {
			return true
		}
	}
	return false
}

// publisher reads lines and publishes them. One goroutine calls run (which
// starts and waits for its reader and workers) and then report; the NATS
// client calls onAsyncError from its own goroutines, and the progress
// goroutine reads sent and read. bad is only touched by run's goroutine.
type publisher struct {
	opts   *publishOptions
	key    *expr.Value
	prefix string
	js     jetstream.JetStream
	// maxPayload is the server's limit on a message; longer events are
	// skipped as bad lines.
	maxPayload int

	sent atomic.Int64 // events handed to PublishMsgAsync
	read atomic.Int64 // input bytes consumed

	bad []badLine // every skipped line; err only for the first maxReportedLines

	mu       sync.Mutex
	failed   int64 // publishes the server rejected or never acked
	firstErr error
}

func (p *publisher) onAsyncError(_ jetstream.JetStream, m *nats.Msg, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed++
	if p.firstErr == nil {
		p.firstErr = fmt.Errorf("publish to %s: %w", m.Subject, err)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// lineBatch is a run of non-blank input lines on its way through the
// pipeline: the reader fills lines and nos, a worker fills subjects and
// errs and closes done, the publisher publishes it.
type lineBatch struct {
	buf      []byte   // the lines' bytes; the NATS client keeps them until acked
	lines    [][]byte // slices of buf
	nos      []int    // their line numbers
	subjects []string // "source.<key token>", or "" when errs[i] is set
	errs     []error
	done     chan struct{}
}

// batchLines is the number of lines a worker takes at a time.
const batchLines = 512

// run publishes the lines of in. Three stages keep the order of the input:
// one goroutine reads batches of lines, workers (one per CPU) decode the
// events and compute their subjects, and the calling goroutine publishes
// batch after batch in input order. run waits for every goroutine it starts
// before it returns.
func (p *publisher) run(ctx context.Context, in io.Reader) error {
	workers := max(1, runtime.GOMAXPROCS(0))
	work := make(chan *lineBatch)
	order := make(chan *lineBatch, 2*workers) // bounds the batches in flight
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error // set by the reader before it closes order

	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(work)
		readErr = p.readBatches(in, work, order, stop)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for b := range work {
				for i, line := range b.lines {
					if len(line) > p.maxPayload {
						b.errs[i] = fmt.Errorf("the event has %d bytes, more than the NATS server's maximum payload of %d", len(line), p.maxPayload)
						continue
					}
					subj, err := p.subject(scratch[:0], line)
					if err != nil {
						b.errs[i] = err
						continue
					}
					scratch = subj
					b.subjects[i] = string(subj)
				}
				close(b.done)
			}
		}()
	}

	err := p.publishBatches(ctx, order)
	close(stop)
	if err != nil {
		// The reader may be blocked reading a pipe or a terminal: closing
		// the input ends that read.
		switch c := in.(type) {
		case interface{ Abort() }:
			c.Abort()
		case io.Closer:
			c.Close()
		}
	}
	for range order { // let the reader finish; workers end when work closes
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	return p.waitAcks(ctx)
}

// maxLine is the longest input line accepted.
const maxLine = 16 << 20

// readBatches is the reader stage: it sends every batch to a worker and then to
// the publisher, and returns the input's error. A batch is sent when it is
// full or when the input has nothing more buffered, so that events from a
// slow producer (tail -f | cepctl publish) are not held back waiting for a
// full batch. It stops early when stop is closed.
func (p *publisher) readBatches(in io.Reader, work, order chan<- *lineBatch, stop <-chan struct{}) error {
	br := bufio.NewReaderSize(countingReader{in, &p.read}, 256<<10)
	var b *lineBatch
	var ends []int
	send := func() bool {
		for i := range ends {
			from := 0
			if i > 0 {
				from = ends[i-1]
			}
			b.lines[i] = b.buf[from:ends[i]:ends[i]]
		}
		b.subjects = make([]string, len(b.lines))
		b.errs = make([]error, len(b.lines))
		select {
		case work <- b:
		case <-stop:
			return false
		}
		select {
		case order <- b:
		case <-stop:
			return false
		}
		b = nil
		return true
	}
	var long []byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxLine {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			if len(long) > maxLine {
				return fmt.Errorf("%s: line %d is longer than 16 MiB", inputName(p.opts.File), lineNo)
			}
			line = long
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if b == nil {
				b = &lineBatch{buf: make([]byte, 0, 64<<10), done: make(chan struct{})}
				ends = ends[:0]
			}
			b.buf = append(b.buf, line...)
			ends = append(ends, len(b.buf))
			b.lines = append(b.lines, nil)
			b.nos = append(b.nos, lineNo)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
		if b != nil && (len(b.lines) == batchLines || br.Buffered() == 0) && !send() {
			return nil
		}
	}
	if b != nil && !send() {
		return nil
	}
	return nil
}

// publishBatches is the publishing stage: batches in input order, each
// event once its worker is done with the batch. The first event goes
// synchronously, so that a missing stream or a refused subject fails at
// once instead of once per event.
func (p *publisher) publishBatches(ctx context.Context, order <-chan *lineBatch) error {
	first := true
	for {
		var b *lineBatch
		select {
		case b = <-order:
		case <-ctx.Done():
			return p.interrupted(ctx)
		}
		if b == nil {
			return nil // the reader is done
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return p.interrupted(ctx)
		}
		for i, subj := range b.subjects {
			if err := b.errs[i]; err != nil {
				if len(p.bad) >= maxReportedLines {
					err = nil // only the first errors are described
				}
				p.bad = append(p.bad, badLine{b.nos[i], err})
				continue
			}
			msg := &nats.Msg{Subject: subj, Data: b.lines[i]}
			var err error
			if first {
				first = false
				err = p.publishSync(ctx, msg)
			} else {
				err = p.publishAsync(ctx, msg)
			}
			if err != nil {
				return err
			}
		}
	}
}

// subject appends "source.<key token>" for the event in line to b.
func (p *publisher) subject(b, line []byte) ([]byte, error) {
	ev, err := expr.DecodeEvent(line)
	if err != nil {
		return nil, err
	}
	v, err := p.key.Eval(ev, nil)
	if err != nil {
		return nil, fmt.Errorf("key %s: %v", p.key.Source(), err)
	}
	k, err := expr.KeyString(v)
	if err != nil {
		return nil, fmt.Errorf("key %s: %v", p.key.Source(), err)
	}
	return keygroup.AppendKeyToken(append(b, p.prefix...), k), nil
}

func (p *publisher) publishSync(ctx context.Context, msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.AckWait)
	defer cancel()
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return p.interrupted(ctx)
		}
		return fmt.Errorf("publish to %s: %w", msg.Subject, err)
	}
	p.sent.Add(1)
	return nil
}

// publishAsync publishes msg, waiting while MaxPending publishes await
// their ack, for AckWait at most without progress.
func (p *publisher) publishAsync(ctx context.Context, msg *nats.Msg) error {
	var stalled time.Time
	for {
		_, err := p.js.PublishMsgAsync(msg)
		if err == nil {
			p.sent.Add(1)
			return nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return fmt.Errorf("publish to %s: %w", msg.Subject, err)
		}
		if ctx.Err() != nil {
			return p.interrupted(ctx)
		}
		if stalled.IsZero() {
			stalled = time.Now()
		} else if time.Since(stalled) > p.opts.AckWait {
			return fmt.Errorf("no JetStream acks for %s with %d publishes outstanding", p.opts.AckWait, p.opts.MaxPending)
		}
	}
}

// waitAcks waits for the outstanding acks; those still missing after
// AckWait count as failed.
func (p *publisher) waitAcks(ctx context.Context) error {
	t := time.NewTimer(p.opts.AckWait)
	defer t.Stop()
	select {
	case <-p.js.PublishAsyncComplete():
	case <-t.C:
	case <-ctx.Done():
		return p.interrupted(ctx)
	}
	if n := p.js.PublishAsyncPending(); n > 0 {
		p.mu.Lock()
		p.failed += int64(n)
		if p.firstErr == nil {
			p.firstErr = fmt.Errorf("%d publishes not acknowledged within %s", n, p.opts.AckWait)
		}
		p.mu.Unlock()
	}
	return nil
}

// interrupted is the error of a publish cut short by ctx (Ctrl-C).
func (p *publisher) interrupted(ctx context.Context) error {
	return fmt.Errorf("publish interrupted after %s were sent: %w", plural(p.sent.Load(), "event"), context.Cause(ctx))
}

// report prints the bad lines and the summary, and returns an error when
// any line was skipped or any event not stored.
func (p *publisher) report(d *deps, elapsed time.Duration) error {
	p.mu.Lock()
	failed, firstErr := p.failed, p.firstErr
	p.mu.Unlock()
	res := publishResult{
		Published: p.sent.Load() - failed,
		Skipped:   len(p.bad),
		Failed:    failed,
		Seconds:   elapsed.Seconds(),
		BadLines:  make([]int, len(p.bad)),
	}
	if res.Seconds > 0 {
		res.EventsPerSecond = float64(res.Published) / res.Seconds
	}
	for i, b := range p.bad {
		res.BadLines[i] = b.line
		if b.err != nil {
			fmt.Fprintf(d.stderr, "%s: line %d: %s\n", inputName(p.opts.File), b.line, oneLine(b.err.Error()))
		}
	}
	if len(p.bad) > maxReportedLines {
		fmt.Fprintf(d.stderr, "%s: ... and %d more bad lines\n", inputName(p.opts.File), len(p.bad)-maxReportedLines)
	}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}

	if p.opts.Output == "table" {
		fmt.Fprintf(d.stdout, "published %d events in %.2fs (%.0f/s), %d skipped", res.Published, res.Seconds, res.EventsPerSecond, res.Skipped)
		if failed > 0 {
			fmt.Fprintf(d.stdout, ", %d failed", failed)
		}
		fmt.Fprintln(d.stdout)
	} else {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if err := writeStructured(d.stdout, p.opts.Output, b); err != nil {
			return err
		}
	}

	var errs []string
	if len(p.bad) > 0 {
		errs = append(errs, fmt.Sprintf("%s skipped (%s)", plural(len(p.bad), "bad line"), lineList(res.BadLines)))
	}
	if failed > 0 {
		errs = append(errs, fmt.Sprintf("%s not stored (%v)", plural(failed, "event"), firstErr))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// lineList is "line 3, 9, 12" or, past maxReportedLines, "lines 3, 9, ...".
func lineList(lines []int) string {
	var b strings.Builder
	if len(lines) == 1 {
		b.WriteString("line ")
	} else {
		b.WriteString("lines ")
	}
	for i, l := range lines {
		if i == maxReportedLines {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(l))
	}
	return b.String()
}

// startProgress draws a progress line on w (a terminal), redrawn at most
// ten times a second until the returned stop is called; stop erases it.
// size is the input's size in bytes, 0 when unknown (then a spinner, no
// bar). The bar follows the bytes read, the text the events sent.
func startProgress(w io.Writer, start time.Time, sent, read *atomic.Int64, size int64) (stop func()) {
	total := size
	if total <= 0 {
		total = -1 // progressbar's "unknown": a spinner
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30), progressbar.OptionSetTheme(progressbar.ThemeASCII),
		progressbar.OptionThrottle(0), // this loop sets the pace
		// no spinner goroutine of its own (it has no stop and races with
		// Describe): the spinner turns as this loop redraws
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionSetPredictTime(false), progressbar.OptionSetElapsedTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(), progressbar.OptionUseANSICodes(true), progressbar.OptionSetRenderBlankState(false))
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				_ = bar.Clear()
				return
			case now := <-t.C:
				bar.Describe(progressText(sent.Load(), now.Sub(start)))
				_ = bar.Set64(min(read.Load(), max(size, 0)))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// progressText is "450,000 events  150,000/s".
func progressText(sent int64, elapsed time.Duration) string {
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(sent) / s
	}
	return humanize.Comma(sent) + " events  " + humanize.Comma(int64(rate+0.5)) + "/s"
}
