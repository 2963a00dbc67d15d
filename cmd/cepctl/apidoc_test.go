package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/testutil"
)

// shBlockRE finds docs/api.md's sh blocks, each with the json block that
// may follow it (what the call answers).
var shBlockRE = regexp.MustCompile("(?s)```sh\n(.*?)```\\s*(?:```json\n(.*?)```)?")

// The curl examples of docs/api.md run against a real node, in order:
// each exits 0, and where the document shows the answer, the answer has
// every field the document shows (values differ: indexes, addresses,
// passwords), so a renamed field or a wrong procedure fails here.
func TestAPIDocExamples(t *testing.T) {
	url := startNode(t)
	testutil.Eventually(t, 60*time.Second, func() error {
		// a metadata leader, which the changes need
		res, err := http.Get(url + "/readyz")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return errors.New(res.Status)
		}
		if r := cepctl(t, url, "node", "list"); r.code != 0 || !strings.Contains(r.stdout, "leader") {
			return errors.New("no metadata leader yet")
		}
		return nil
	})
	t.Chdir("../..")
	doc, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlockRE.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 8 {
		t.Fatalf("docs/api.md has %d sh blocks, want the examples", len(blocks))
	}
	for _, b := range blocks[1:] { // the first sets CEP, as the test does
		cmd := exec.Command("sh", "-ec", b[1])
		cmd.Env = append(os.Environ(), "CEP="+url)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Errorf("%s\nfailed: %v\n%s%s", b[1], err, out.String(), errOut.String())
			continue
		}
		if b[2] == "" {
			if out.Len() == 0 {
				t.Errorf("%s\nprinted nothing", b[1])
			}
			continue
		}
		var want, got any
		if err := json.Unmarshal([]byte(b[2]), &want); err != nil {
			t.Fatalf("the document's answer to\n%s\nis not JSON: %v", b[1], err)
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Errorf("%s\nanswered %q, not JSON: %v", b[1], out.String(), err)
			continue
		}
		if missing := missingFields("", want, got); len(missing) > 0 {
			t.Errorf("%s\nanswered %s\nwithout %s, which the document shows", b[1], out.String(), strings.Join(missing, ", "))
		}
	}
}

// missingFields lists the object fields of want (by path) that got lacks.
func missingFields(path string, want, got any) []string {
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, missingFields(path+"."+k, v, gv)...)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(w) > 0 && len(g) == 0 {
			return []string{path}
		}
		if len(w) > 0 {
			out = append(out, missingFields(path+"[0]", w[0], g[0])...)
		}
	}
	return out
}
