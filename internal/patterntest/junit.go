package patterntest

import (
	"encoding/xml"
	"io"
	"strings"
)

// JUnit XML as CI systems read it (the schema of Ant's JUnit task, which
// Jenkins, GitLab and GitHub's test reporters take).
type (
	JUnitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Suites   []JUnitSuite `xml:"testsuite"`
	}
	JUnitSuite struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Cases    []JUnitCase `xml:"testcase"`
	}
	JUnitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Failure   *JUnitProblem `xml:"failure,omitempty"`
		Error     *JUnitProblem `xml:"error,omitempty"`
	}
	JUnitProblem struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
)

// Suite is one file's results, or the error that kept it from running.
type Suite struct {
	File    string
	Results []Result
	Err     error
}

// WriteJUnit writes the suites as JUnit XML: a testsuite per file, a
// testcase per case; a file that could not run is one erroring testcase.
func WriteJUnit(w io.Writer, suites []Suite) error {
	var all JUnitSuites
	for _, s := range suites {
		js := JUnitSuite{Name: s.File}
		if s.Err != nil {
			js.Cases = append(js.Cases, JUnitCase{Name: "(load)", Classname: s.File,
				Error: &JUnitProblem{Message: s.Err.Error(), Text: s.Err.Error()}})
			js.Errors++
		}
		for _, r := range s.Results {
			jc := JUnitCase{Name: r.Case, Classname: s.File}
			switch {
			case r.Err != nil:
				jc.Error = &JUnitProblem{Message: r.Err.Error(), Text: r.Err.Error()}
				js.Errors++
			case len(r.Problems) > 0:
				jc.Failure = &JUnitProblem{Message: r.Problems[0], Text: strings.Join(r.Problems, "\n")}
				js.Failures++
			}
			js.Cases = append(js.Cases, jc)
		}
		js.Tests = len(js.Cases)
		all.Tests += js.Tests
		all.Failures += js.Failures
		all.Errors += js.Errors
		all.Suites = append(all.Suites, js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
