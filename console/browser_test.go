package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/internal/testcerts"
	"github.com/cepcluster/cep/internal/testutil"
)

var screenshots = flag.Bool("screenshots", false, "save the console's screenshots to docs/console-*.png")

// chromium finds a Chromium or Chrome to drive, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a cepnode and a browser")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (apt-get install chromium): the console is not tried in a browser")
	return ""
}

// node runs a single-node cluster, cepnode as a process with its embedded
// NATS and the token file given, until the test ends; it returns the API
// URL and the directory holding cepctl.
func node(t *testing.T, tokenFile string, extra ...string) (url, bin string) {
	t.Helper()
	bin = t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/cepnode", "../cmd/cepctl").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	args := append([]string{"--data", t.TempDir(), "--raft-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0",
		"--gossip-addr", "127.0.0.1:0", "--nats-port", "-1", "--log-format", "json", "--token-file", tokenFile}, extra...)
	cmd := exec.Command(filepath.Join(bin, "cepnode"), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	done := make(chan struct{})
	go func() { // reads the node's log until it exits
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Msg, API string
				TLS      bool
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "cepnode started" {
				scheme := "http://"
				if rec.TLS {
					scheme = "https://"
				}
				started <- scheme + rec.API
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-done
		cmd.Wait()
	})
	select {
	case url = <-started:
	case <-done:
		t.Fatal("cepnode exited before it started")
	case <-time.After(60 * time.Second):
		t.Fatal("cepnode did not start within 60s")
	}
	return url, bin
}

// cepctl runs the command line against the node as the README does.
func cepctl(t *testing.T, bin, url, token string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "cepctl"), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CEPCTL_SERVER=" + url, "CEPCTL_TOKEN=" + token}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cepctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// netLog records what the page asks for and what the browser complains of.
type netLog struct {
	mu       sync.Mutex
	urls     map[network.RequestID]string
	ended    map[network.RequestID]bool // finished, failed or cancelled
	problems []string                   // exceptions, console errors, CSP violations
}

func (l *netLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.urls[e.RequestID] = e.Request.URL
	case *network.EventLoadingFinished:
		l.ended[e.RequestID] = true
	case *network.EventLoadingFailed:
		l.ended[e.RequestID] = true
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			d += " " + e.ExceptionDetails.Exception.Description
		}
		l.problems = append(l.problems, "exception: "+d)
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError {
			l.problems = append(l.problems, fmt.Sprintf("%s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	}
}

// requests returns the URLs asked for whose path contains part, and
// whether each has ended.
func (l *netLog) requests(part string) (urls []string, open int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, u := range l.urls {
		if strings.Contains(u, part) {
			urls = append(urls, u)
			if !l.ended[id] {
				open++
			}
		}
	}
	return urls, open
}

// The console in a real browser against a real node, as a person uses
// it: what it shows is checked against the API's own answers.
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte("admin A\noperator O\nreader R\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, bin := node(t, tokenFile)
	testutil.Eventually(t, 30*time.Second, func() error {
		cmd := exec.Command(filepath.Join(bin, "cepctl"), "source", "create", "bank", "--key", "e.account")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CEPCTL_SERVER=" + url, "CEPCTL_TOKEN=A"}
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "already") {
			return fmt.Errorf("source create: %v: %s", err, out)
		}
		return nil
	})
	cepctl(t, bin, url, "A", "pattern", "deploy", "../examples/login-fail-logout.yaml")

	hc := http.DefaultClient
	opt := api.WithClientToken("A")
	clusterc := cepv1connect.NewClusterServiceClient(hc, url, opt)
	patternc := cepv1connect.NewPatternServiceClient(hc, url, opt)
	matchc := cepv1connect.NewMatchServiceClient(hc, url, opt)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // a loaded CI machine
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 800), chromedp.Flag("headless", true))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	nl := &netLog{urls: map[network.RequestID]string{}, ended: map[network.RequestID]bool{}}
	if err := chromedp.Listen(bctx, nl.listen); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}

	shows := func() string {
		c, stop := context.WithTimeout(bctx, 5*time.Second)
		defer stop()
		text, _ := chromedp.Run(c, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		return text
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, shows())
		}
	}
	eval := func(what, expr string, out any, opts ...chromedp.EvaluateOption) {
		t.Helper()
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[json.RawMessage](expr, opts...))
		if err == nil {
			err = json.Unmarshal(raw, out)
		}
		if err != nil {
			t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, shows())
		}
	}
	// waitFor waits until the page's expr is true.
	waitFor := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var ok bool
			eval(what, "!!("+expr+")", &ok)
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 60s; the page shows:\n%s", what, shows())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// click clicks the first element of sel whose text starts with text.
	click := func(sel, text string) {
		t.Helper()
		var ok bool
		eval("click "+text, fmt.Sprintf(`(() => { const b = [...document.querySelectorAll(%q)].find(b => b.textContent.startsWith(%q)); if (b) b.click(); return !!b })()`, sel, text), &ok)
		if !ok {
			t.Fatalf("no %s %q to click; the page shows:\n%s", sel, text, shows())
		}
	}
	// labelled checks that every control of the page has a name a screen
	// reader says (a label, an aria-label or its text)
	labelled := func(page string) {
		t.Helper()
		var bare []string
		eval("controls of "+page, `[...document.querySelectorAll("input, select, textarea, button")].filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim()).map(e => e.outerHTML)`, &bare)
		if len(bare) > 0 {
			t.Errorf("on the %s page, controls without a name: %q", page, bare)
		}
	}
	// screenshotAs keeps a screenshot for a person to look at, in the
	// test's log directory (CONSOLE_SHOTS)
	screenshotAs := func(name string) {
		t.Helper()
		dir := os.Getenv("CONSOLE_SHOTS")
		if dir == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
	screenshot := func(name string) {
		t.Helper()
		if !*screenshots {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// the root sends the browser to the console, which asks for a token
	run("open the node", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	loc, _ := chromedp.Run(bctx, chromedp.Location())
	if loc != url+"/ui/" {
		t.Errorf("/ led to %s, want %s/ui/", loc, url)
	}
	signIn := func(token string) {
		t.Helper()
		run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("form.signin button")))
	}
	labelled("sign-in")
	signIn("O")

	// the cluster page: the node and each shard the API lists, its leader
	status, err := clusterc.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	shards, err := clusterc.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		t.Fatal(err)
	}
	n := status.Msg.Nodes[0]
	waitFor("the node, alive and leading the metadata",
		fmt.Sprintf(`[...document.querySelectorAll("table")].some(t => t.caption.textContent == "Nodes" && [...t.tBodies[0].rows].some(r => r.cells[0].textContent == %q && r.cells[1].textContent.includes("alive") && r.cells[2].textContent == "leader" && r.cells[5].textContent == %q && r.cells[6].textContent == %q))`, n.Id, n.Version, n.ApiAddress))
	// the version the page shows is the build the node's metrics name
	if build := buildInfo(t, url); n.Version == "" || n.Version != build {
		t.Errorf("GetStatus says node1 runs %q, its cep_build_info %q", n.Version, build)
	}
	var rows [][]string
	eval("read the shards", `[...[...document.querySelectorAll("table")].find(t => t.caption.textContent == "Shards").tBodies[0].rows].map(r => [...r.cells].map(c => c.textContent))`, &rows)
	if len(rows) != len(shards.Msg.Shards) {
		t.Fatalf("the page lists %d shards, the API %d: %q", len(rows), len(shards.Msg.Shards), rows)
	}
	for i, sh := range shards.Msg.Shards {
		want := []string{fmt.Sprint(sh.Id), fmt.Sprintf("%d–%d", sh.KeyGroups.First, sh.KeyGroups.Last), sh.LeaderNodeId}
		if !reflect.DeepEqual(rows[i][:3], want) {
			t.Errorf("shard row %d: %q, want %q", i, rows[i][:3], want)
		}
	}

	// the pattern list, and the operator may deploy
	run("patterns", chromedp.Click(chromedp.CSS(`nav a[href="#/patterns"]`)))
	waitFor("the pattern in the list", `!!document.querySelector('a[href="#/patterns/login-fail-logout"]')`)
	waitFor("the deploy link for an operator", `!!document.querySelector('a[href="#/deploy"]')`)

	// its page: the automaton names every stage the API says it has
	run("open the pattern", chromedp.Click(chromedp.CSS(`a[href="#/patterns/login-fail-logout"]`)))
	waitFor("the automaton drawn", `document.querySelector(".automaton svg text")`)
	var labels []string
	eval("read the automaton", `[...document.querySelectorAll(".automaton svg text")].map(t => t.textContent)`, &labels)
	spec, _ := os.ReadFile("../examples/login-fail-logout.yaml")
	v, err := patternc.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{Spec: string(spec)}))
	if err != nil || len(v.Msg.Stages) == 0 {
		t.Fatalf("validate: %v %v", v, err)
	}
	for _, s := range v.Msg.Stages {
		if !slices.ContainsFunc(labels, func(l string) bool { return strings.HasPrefix(l, s) }) {
			t.Errorf("the automaton does not name stage %q: %q", s, labels)
		}
	}
	waitFor("the delete button for an operator", `[...document.querySelectorAll("button")].some(b => b.textContent.startsWith("Delete pattern"))`)
	waitFor("the tail open", `document.querySelector(".tail-state").textContent.startsWith("Following")`)
	labelled("pattern")

	// the match arrives live, as the API's own tail has it
	cepctl(t, bin, url, "A", "publish", "--source", "bank", "-f", "../examples/events.jsonl")
	waitFor("acc-1's match", `[...document.querySelectorAll("li.record.match .rkey")].some(k => k.textContent == "acc-1")`)
	tail, err := matchc.Tail(ctx, connect.NewRequest(&cepv1.TailRequest{Pattern: "login-fail-logout", Start: cepv1.TailStart_TAIL_START_ALL, StopAtEnd: true}))
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	for tail.Receive() {
		var m map[string]any
		if err := json.Unmarshal(tail.Msg().Json, &m); err != nil {
			t.Fatal(err)
		}
		want = append([]map[string]any{m}, want...) // newest first, as the page
	}
	if tail.Err() != nil || len(want) == 0 {
		t.Fatalf("the API's tail: %d records, %v", len(want), tail.Err())
	}
	var shown []string
	eval("read the records", `[...document.querySelectorAll("li.record pre")].map(p => p.textContent)`, &shown)
	var got []map[string]any
	for _, s := range shown {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("a record the page shows is not JSON: %v: %s", err, s)
		}
		got = append(got, m)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the page shows\n%v\nthe API's tail has\n%v", got, want)
	}
	var top bool
	run("expand the match", chromedp.Click(chromedp.CSS(`li.record.match summary`)))
	eval("scroll to the top", `(scrollTo(0, 0), true)`, &top)
	if *screenshots { // tall enough for the automaton, settings and output at once
		run("a taller window", chromedp.EmulateViewport(1280, 1100))
		screenshot("console-pattern.png")
		run("back to 1280×800", chromedp.EmulateViewport(1280, 800))
	}

	// the filter keeps the key's records only
	var keys []string
	eval("read the keys", `[...document.querySelectorAll("li.record .rkey")].map(k => k.textContent)`, &keys)
	var acc1 []string
	for _, k := range keys {
		if k == "acc-1" {
			acc1 = append(acc1, k)
		}
	}
	run("filter", chromedp.SendKeys(chromedp.CSS(`.toolbar input[type=search]`), "acc-1"))
	waitFor("acc-1's records only", fmt.Sprintf(`JSON.stringify([...document.querySelectorAll("li.record .rkey")].map(k => k.textContent)) == %q`, mustJSON(acc1)))

	// leaving the page closes the stream: in the browser and on the node
	tails, open := nl.requests("/cep.v1.MatchService/Tail")
	if len(tails) != 1 || open != 1 {
		t.Fatalf("on the pattern page: tail requests %q, %d open; want one open", tails, open)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := streamsActive(t, url); n != 1 {
			return fmt.Errorf("the node serves %v tails, want the page's", n)
		}
		return nil
	})
	// pausing closes the stream; resuming opens it after the last record
	// seen, so nothing is shown twice
	click("button", "Pause")
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := streamsActive(t, url); n != 0 {
			return fmt.Errorf("paused, the node serves %v tails", n)
		}
		return nil
	})
	click("button", "Resume")
	waitFor("following again", `document.querySelector(".tail-state").textContent.startsWith("Following")`)
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := streamsActive(t, url); n != 1 {
			return fmt.Errorf("resumed, the node serves %v tails", n)
		}
		return nil
	})
	var again []string
	eval("read the keys", `[...document.querySelectorAll("li.record .rkey")].map(k => k.textContent)`, &again)
	if !reflect.DeepEqual(again, acc1) {
		t.Errorf("after resuming the page shows %q, before %q", again, acc1)
	}
	// from new records only the list starts empty; from everything
	// retained it has them all again
	from := func(v string) {
		t.Helper()
		var ok bool
		eval("from "+v, fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true })(document.querySelector(".toolbar select"))`, v), &ok)
	}
	from("new")
	waitFor("no records from new", `document.querySelectorAll("li.record").length == 0 && document.querySelector(".tail-state").textContent.startsWith("Following")`)
	from("all")
	waitFor("acc-1's records again", fmt.Sprintf(`JSON.stringify([...document.querySelectorAll("li.record .rkey")].map(k => k.textContent)) == %q`, mustJSON(acc1)))
	inspectKey(t, ctx, bin, url, patternc, run, eval, waitFor, labelled, screenshotAs)
	run("leave", chromedp.Click(chromedp.CSS(`nav a[href="#/"]`)))
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, open := nl.requests("/cep.v1.MatchService/Tail"); open != 0 {
			return errors.New("the browser still has the tail open")
		}
		if n := streamsActive(t, url); n != 0 {
			return fmt.Errorf("the node still serves %v tails", n)
		}
		return nil
	})
	screenshot("console-cluster.png")

	// the list counts the pattern's matches as the API's tail has them
	matched := 0
	for _, r := range want {
		if r["type"] == "match" {
			matched++
		}
	}
	run("patterns", chromedp.Click(chromedp.CSS(`nav a[href="#/patterns"]`)))
	waitFor("the match counted", fmt.Sprintf(`(() => { const t = [...document.querySelectorAll("table")].find(t => t.caption.textContent.startsWith("Deployed patterns")); if (!t) return false; const col = [...t.tHead.rows[0].cells].findIndex(c => c.textContent == "Matches"); const row = [...t.tBodies[0].rows].find(r => r.cells[0].textContent == "login-fail-logout"); return !!row && row.cells[col].textContent == %q })()`, fmt.Sprint(matched)))
	patternStatsShown(t, ctx, patternc, eval, waitFor, "login-fail-logout", matched)
	screenshotAs("patterns.png")

	editorErrorsAtTheirLine(t, ctx, url, patternc, run, eval, waitFor, click, screenshotAs)

	// deploy: a refused document shows the API's reason; a good one runs
	bad := "name: console-check\nsource: bank\nstages: []\n"
	vb, err := patternc.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{Spec: bad}))
	if err != nil || vb.Msg.Valid {
		t.Fatalf("the bad document: %v %v", vb, err)
	}
	run("deploy a bad document", chromedp.Navigate(url+"/ui/#/deploy"), chromedp.WaitVisible(chromedp.CSS("#spec")),
		chromedp.SendKeys(chromedp.CSS("#spec"), bad), chromedp.Click(chromedp.CSS(`form.deploy button[type=submit]`)))
	labelled("deploy")
	waitFor("the validation error", fmt.Sprintf(`[...document.querySelectorAll(".error")].some(e => e.textContent.includes(%q))`, vb.Msg.Error.GetMessage()))
	good := "name: console-check\nsource: bank\nkey: e.account\nstages:\n- name: login\n  where: e.type == \"LOGIN\"\n"
	var selected bool
	eval("select the document", `(document.querySelector("#spec").select(), true)`, &selected)
	run("deploy a good document", chromedp.KeyEvent("\b"),
		chromedp.SendKeys(chromedp.CSS("#spec"), good), chromedp.Click(chromedp.CSS(`form.deploy button[type=submit]`)))
	waitFor("deployed", `!!document.querySelector('[role=status] a[href="#/patterns/console-check"]')`)
	if _, err := patternc.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: "console-check"})); err != nil {
		t.Fatalf("the deployed pattern: %v", err)
	}
	run("open it", chromedp.Click(chromedp.CSS(`[role=status] a`)))
	waitFor("its delete button", `[...document.querySelectorAll("button")].some(b => b.textContent.startsWith("Delete pattern"))`)
	click("button", "Delete pattern")
	waitFor("the confirmation", `[...document.querySelectorAll("button")].some(b => b.textContent == "Delete console-check")`)
	click("button", "Delete console-check")
	waitFor("deleted", `!!document.querySelector("[role=status]") && document.querySelector("[role=status]").textContent.includes("Deleted")`)
	if _, err := patternc.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: "console-check"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("the deleted pattern: %v, want NotFound", err)
	}

	buildGoAround(t, ctx, bin, url, patternc, run, eval, waitFor, click, labelled, screenshotAs)
	sourcesAndDeadLetters(t, ctx, bin, url, nl, cepv1connect.NewSourceServiceClient(hc, url, opt), matchc, run, eval, waitFor, labelled, screenshotAs)
	spc := cepv1connect.NewSavepointServiceClient(hc, url, opt)
	createSavepoint(t, ctx, spc, run, eval, waitFor, click, labelled, screenshotAs)
	restoreSavepoint(t, ctx, patternc, spc, eval, waitFor, click, labelled, screenshotAs)

	// a reader is offered neither deploy nor delete
	run("sign out", chromedp.Navigate(url+"/ui/#/"), chromedp.Click(chromedp.CSS(`.who button`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	signIn("R")
	waitFor("signed in as a reader", `!!document.querySelector(".who") && document.querySelector(".who").textContent.includes("reader")`)
	savepointsAsReader(t, ctx, url, spc, run, eval, waitFor)
	run("patterns as a reader", chromedp.Navigate(url+"/ui/#/patterns"))
	waitFor("the pattern in the list", `!!document.querySelector('a[href="#/patterns/login-fail-logout"]')`)
	run("the pattern as a reader", chromedp.Navigate(url+"/ui/#/patterns/login-fail-logout"))
	waitFor("the automaton drawn", `document.querySelector(".automaton svg text")`)
	var offered bool
	eval("look for delete", `[...document.querySelectorAll("button, a")].some(b => /delete|deploy/i.test(b.textContent))`, &offered)
	if offered {
		t.Error("a reader is offered to deploy or delete")
	}
	var stored string
	eval("session storage", `sessionStorage.getItem("cep.token") + "|" + localStorage.length + "|" + document.cookie`, &stored)
	if stored != "R|0|" {
		t.Errorf("the token is kept as %q, want in sessionStorage only", stored)
	}
	// the sanitizer keeps the drawing and drops whatever could run or load
	hostile := `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script>` +
		`<defs><marker id="arrow"><path d="M0,0"/></marker></defs><g onclick="alert(3)"><text x="1" style="color:red">kept</text>` +
		`<a href="javascript:alert(4)"><text>linked</text></a><foreignObject><div xmlns="http://www.w3.org/1999/xhtml">html</div></foreignObject>` +
		`<image href="http://evil.example/x.png"/><rect width="1" fill="url(http://evil.example/f)"/><path d="M1,1" marker-end="url(#arrow)"/></g></svg>`
	var cleaned string
	eval("sanitize", fmt.Sprintf(`import("/ui/app.js").then(m => m.sanitizeSVG(%s).outerHTML)`, mustJSON(hostile)), &cleaned, chromedp.EvalAwaitPromise)
	for _, want := range []string{">kept</text>", `marker-end="url(#arrow)"`, `<marker id="arrow">`} {
		if !strings.Contains(cleaned, want) {
			t.Errorf("the sanitized SVG lost %s: %s", want, cleaned)
		}
	}
	for _, bad := range []string{"alert", "script", "onload", "onclick", "style", "foreignObject", "html", "<image", "<a", "evil", "linked"} {
		if strings.Contains(cleaned, bad) {
			t.Errorf("the sanitized SVG keeps %s: %s", bad, cleaned)
		}
	}

	// the page follows the system's dark scheme, and back
	darkness := func() float64 {
		var rgb []float64
		eval("the background", `getComputedStyle(document.body).backgroundColor.match(/[0-9.]+/g).slice(0, 3).map(Number)`, &rgb)
		return (rgb[0] + rgb[1] + rgb[2]) / 3
	}
	scheme := func(v string) {
		t.Helper()
		if _, err := chromedp.Call(bctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	scheme("dark")
	if d := darkness(); d > 64 {
		t.Errorf("in the dark scheme the background's brightness is %v", d)
	}
	screenshotAs("dark-pattern.png")
	scheme("light")
	if d := darkness(); d < 192 {
		t.Errorf("in the light scheme the background's brightness is %v", d)
	}

	// at a phone's width the pages fit: what is wider (tables, the
	// automaton) scrolls in its own box, not the page
	run("a phone's width", chromedp.EmulateViewport(390, 844))
	var fits bool
	eval("fits", `document.documentElement.scrollWidth <= innerWidth`, &fits)
	if !fits {
		t.Error("the pattern page is wider than a phone")
	}
	screenshotAs("phone-pattern.png")
	run("leave", chromedp.Navigate(url+"/ui/#/"))
	waitFor("the shards", `[...document.querySelectorAll("caption")].some(c => c.textContent == "Shards")`)
	eval("fits", `document.documentElement.scrollWidth <= innerWidth`, &fits)
	if !fits {
		t.Error("the cluster page is wider than a phone")
	}
	screenshotAs("phone-cluster.png")
	for _, pg := range []struct{ hash, caption string }{{"sources", "Sources"}, {"savepoints", "Savepoints, newest first"}} {
		run("the "+pg.hash+" page on a phone", chromedp.Navigate(url+"/ui/#/"+pg.hash))
		waitFor("its table", fmt.Sprintf(`[...document.querySelectorAll("caption")].some(c => c.textContent == %q)`, pg.caption))
		eval("fits", `document.documentElement.scrollWidth <= innerWidth`, &fits)
		if !fits {
			t.Errorf("the %s page is wider than a phone", pg.hash)
		}
	}
	run("the builder on a phone", chromedp.Navigate(url+"/ui/#/build"))
	waitFor("its form", `!!document.querySelector("#b-step-0-cond-0-field")`)
	eval("fits", `document.documentElement.scrollWidth <= innerWidth`, &fits)
	if !fits {
		t.Error("the builder is wider than a phone")
	}
	screenshotAs("phone-builder.png")

	// every request went to the node, and the browser had nothing to
	// complain of (a CSP violation would be logged here)
	all, _ := nl.requests("")
	for _, u := range all {
		if !strings.HasPrefix(u, url+"/") && !strings.HasPrefix(u, "blob:"+url+"/") {
			t.Errorf("the page asked %s, not the node", u)
		}
	}
	if len(all) < 10 {
		t.Errorf("only %d requests recorded: %q", len(all), all)
	}
	nl.mu.Lock()
	defer nl.mu.Unlock()
	for _, p := range nl.problems {
		t.Errorf("the browser reports %s", p)
	}
}

// streamsActive reads the node's open Tail streams from /metrics.
func streamsActive(t *testing.T, url string) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer A")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "cep_rpc_streams_active{") && strings.Contains(line, "MatchService/Tail") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			return v
		}
	}
	return 0
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Over TLS the console works as it does in clear: the page calls the
// origin it came from, https, and nothing else.
func TestConsoleOverTLS(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	ca, err := testcerts.NewAuthority(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("node1")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("reader R\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ := node(t, tokenFile, "--tls-cert", cert.Cert, "--tls-key", cert.Key, "--tls-ca", ca.CA)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the node serves %s, not https", url)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// the browser does not know the test's CA
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Flag("ignore-certificate-errors", true), chromedp.Flag("headless", true))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	nl := &netLog{urls: map[network.RequestID]string{}, ended: map[network.RequestID]bool{}}
	if err := chromedp.Listen(bctx, nl.listen); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "R"), chromedp.Click(chromedp.CSS("form.signin button"))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`[...document.querySelectorAll("table")].some(t => t.caption.textContent == "Nodes" && [...t.tBodies[0].rows].some(r => r.cells[0].textContent == "node1" && r.cells[1].textContent.includes("alive")))`))
		if err != nil || !ok {
			text, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
			return fmt.Errorf("node1 alive not shown (%v):\n%s", err, text)
		}
		return nil
	})
	all, _ := nl.requests("")
	if len(all) < 4 {
		t.Errorf("only %d requests: %q", len(all), all)
	}
	for _, u := range all {
		if !strings.HasPrefix(u, url+"/") {
			t.Errorf("the page asked %s, not the node", u)
		}
	}
}

// buildInfo reads the version label of the node's cep_build_info.
func buildInfo(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "cep_build_info{"); ok {
			for _, kv := range strings.Split(rest[:strings.IndexByte(rest, '}')], ",") {
				if v, ok := strings.CutPrefix(kv, `version="`); ok {
					return strings.TrimSuffix(v, `"`)
				}
			}
		}
	}
	return ""
}
