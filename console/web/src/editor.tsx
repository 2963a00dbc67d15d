// The pattern editor: a document or query as text, its automaton redrawn
// as it changes, and the API's validation error shown at the line (and
// column) it points to.
import { useEffect, useRef, useState } from "preact/hooks";
import { patterns } from "./api";
import type { SpecError } from "./gen/cep/v1/pattern_pb";
import { ErrorBox, Status, SVG } from "./ui";

// where names the stage and field an error is about, as a person reads it.
function where(e: SpecError): string {
  const parts: string[] = [];
  if (e.line > 0) parts.push(`line ${e.line}${e.column > 0 ? `, column ${e.column}` : ""}`);
  if (e.stage) parts.push(`stage "${e.stage}"`);
  if (e.field) parts.push(`field "${e.field}"`);
  return parts.join(", ");
}

// SpecProblem shows a refused document's error: its place and message,
// and the document's lines around it with the message under the line it
// points to (a caret under the column).
export function SpecProblem(props: { spec: string; error: SpecError; id?: string }) {
  const e = props.error;
  const lines = props.spec.split("\n");
  const at = e.line > 0 && e.line <= lines.length ? e.line : 0;
  const from = Math.max(1, at - 2);
  const to = Math.min(lines.length, at + 2);
  const shown = at ? lines.slice(from - 1, to) : [];
  const w = where(e);
  return (
    <div class="spec-problem" role="alert" id={props.id}>
      <p class="error">
        <Status kind="bad">
          Not valid{w ? ` (${w})` : ""}: {e.message}
        </Status>
      </p>
      {at > 0 && (
        <pre class="spec-lines" aria-label={`The document around line ${at}`}>
          {shown.map((l, i) => {
            const n = from + i;
            return n === at ? (
              <>
                <div class="line bad" data-line={n} key={n}>
                  <span class="ln" aria-hidden="true">
                    {n}
                  </span>
                  <code>{l}</code>
                </div>
                <div class="at" key="at">
                  <span class="ln" aria-hidden="true" />
                  <code>
                    {" ".repeat(Math.max(0, e.column - 1))}^ {e.message}
                  </code>
                </div>
              </>
            ) : (
              <div class="line" data-line={n} key={n}>
                <span class="ln" aria-hidden="true">
                  {n}
                </span>
                <code>{l}</code>
              </div>
            );
          })}
        </pre>
      )}
    </div>
  );
}

// selectLine puts the textarea's caret on line (1-based), so that the
// keyboard lands where the error is.
export function selectLine(ta: HTMLTextAreaElement, line: number) {
  const lines = ta.value.split("\n");
  if (line < 1 || line > lines.length) return;
  let start = 0;
  for (let i = 0; i < line - 1; i++) start += lines[i].length + 1;
  ta.setSelectionRange(start, start + lines[line - 1].length);
}

// useExplained asks the API to draw the spec's automaton, a moment after
// the last change (not at every key), and keeps the last drawing while
// the text does not compile. It validates first: ExplainPattern answers
// an invalid spec with an error status, which the browser logs as a
// failed request at every key.
export function useExplained(spec: string, name: string) {
  const [svg, setSvg] = useState<Drawn | null>(null);
  useEffect(() => {
    if (!spec.trim()) {
      setSvg(null);
      return;
    }
    const ctl = new AbortController();
    const timer = setTimeout(async () => {
      try {
        const v = await patterns.validatePattern({ spec, name }, { signal: ctl.signal });
        if (!v.valid || ctl.signal.aborted) return;
        const r = await patterns.explainPattern({ spec, name }, { signal: ctl.signal });
        if (!ctl.signal.aborted) setSvg({ svg: r.svg, text: r.text, spec });
      } catch {
        // not valid (yet): validation says why
      }
    }, 400);
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [spec, name]);
  return svg;
}

// Drawn is a spec's automaton, as ExplainPattern draws it.
export type Drawn = { svg: string; text: string; spec: string };

// Automaton draws the explained spec, or says there is none yet; a
// drawing of an earlier text says so once the current one is known to
// be refused (invalid).
export function DraftAutomaton(props: { drawn: Drawn | null; spec: string; invalid: boolean }) {
  return (
    <div class="draft-automaton">
      <h2>Automaton</h2>
      {props.drawn && props.invalid && props.drawn.spec !== props.spec && (
        <p class="hint">
          Drawn for the last valid version: the current one is not valid (yet).
        </p>
      )}
      {props.drawn ? (
        <SVG class="automaton" svg={props.drawn.svg} label={props.drawn.text} />
      ) : (
        <p class="hint">Drawn here once the pattern compiles.</p>
      )}
    </div>
  );
}

// useValidation validates spec on demand and keeps the answer's error.
export function useValidation() {
  const [problem, setProblem] = useState<{ spec: string; error: SpecError } | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const ta = useRef<HTMLTextAreaElement>(null);
  const validate = async (spec: string, name: string): Promise<boolean> => {
    setErr(null);
    setProblem(null);
    try {
      const v = await patterns.validatePattern({ spec, name });
      if (v.valid) return true;
      const e = v.error ?? ({ message: "the pattern is not valid", line: 0, column: 0, stage: "", field: "" } as SpecError);
      setProblem({ spec, error: e });
      if (ta.current && e.line > 0) {
        ta.current.focus();
        selectLine(ta.current, e.line);
      }
    } catch (e) {
      setErr(e);
    }
    return false;
  };
  return { problem, err, validate, ta, clear: () => setProblem(null) };
}

export { ErrorBox };
