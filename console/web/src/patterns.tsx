// The pattern pages: the list, one pattern (document, automaton, live
// output), and deploying one.
import { useEffect, useRef, useState } from "preact/hooks";
import { Code, ConnectError } from "@connectrpc/connect";
import { matches, patterns, type Role, mayOperate } from "./api";
import { PatternState, RecordType, SpecFormat, type Pattern, type PatternStats } from "./gen/cep/v1/pattern_pb";
import { TailStart, type Record as OutRecord } from "./gen/cep/v1/match_pb";
import { ErrorBox, Status, Table, Updated, errorText, fmtNum, usePoll, SVG } from "./ui";
import { Inspect } from "./inspect";
import { DraftAutomaton, SpecProblem, useExplained, useValidation } from "./editor";

// The counters GetPatternStats sums over the shards' leaders, and the
// ones that are trouble when not zero.
const counters: [keyof PatternStats & string, string, boolean][] = [
  ["matches", "Matches", false],
  ["timeouts", "Timeouts", false],
  ["late", "Late", false],
  ["deadLetters", "Dead letters", true],
  ["partialMatches", "Partial matches", false],
  ["conditionErrors", "Condition errors", true],
];

// The rate history each pattern's sparkline draws: a sample per poll,
// the last minute's.
const sparkSamples = 30;
type Sample = { at: number; matches: number };

// rates turns samples of a counter into per-second rates between them.
export function rates(h: Sample[]): number[] {
  const out: number[] = [];
  for (let i = 1; i < h.length; i++) {
    const dt = (h[i].at - h[i - 1].at) / 1000;
    out.push(dt > 0 ? Math.max(0, h[i].matches - h[i - 1].matches) / dt : 0);
  }
  return out;
}

// Sparkline draws rates as a line, the highest at the top; its label says
// the figures, for who does not see it.
function Sparkline(props: { values: number[]; label: string }) {
  const w = 90,
    h = 20;
  const v = props.values;
  const max = Math.max(...v, 0);
  const pts = v.map((x, i) => `${v.length > 1 ? ((i / (v.length - 1)) * w).toFixed(1) : 0},${(h - 1 - (max > 0 ? (x / max) * (h - 2) : 0)).toFixed(1)}`);
  return (
    <svg class="spark" width={w} height={h} viewBox={`0 0 ${w} ${h}`} role="img" aria-label={props.label}>
      <line class="base" x1="0" y1={h - 0.5} x2={w} y2={h - 0.5} />
      {pts.length > 1 && <polyline points={pts.join(" ")} />}
    </svg>
  );
}

function fmtRate(r: number): string {
  return r === 0 ? "0" : r < 10 ? r.toFixed(2) : Math.round(r).toLocaleString("en");
}

function stateOf(p: Pattern) {
  switch (p.state) {
    case PatternState.ACTIVE:
      return <Status kind="ok">active</Status>;
    case PatternState.DRAINING:
      return <Status kind="warn">draining</Status>;
    case PatternState.DELETING:
      return <Status kind="warn">deleting</Status>;
  }
  return <span>unknown</span>;
}

export function PatternsPage(props: { role: Role | null }) {
  const history = useRef(new Map<string, Sample[]>());
  const { data, error, at } = usePoll(
    async (signal) => {
      const [list, stats] = await Promise.all([patterns.listPatterns({}, { signal }), patterns.getPatternStats({}, { signal })]);
      const now = Date.now();
      const by = new Map(stats.patterns.map((p) => [p.name, p]));
      for (const p of list.patterns) {
        const h = history.current.get(p.name) ?? [];
        const st = by.get(p.name);
        // a shard not counted would show as a drop: no sample then
        if (st && stats.missingShards.length === 0) h.push({ at: now, matches: Number(st.matches) });
        history.current.set(p.name, h.slice(-sparkSamples - 1));
      }
      return { list: list.patterns, by, missing: stats.missingShards };
    },
    2000,
    [],
  );
  return (
    <section aria-labelledby="patterns-h">
      <h1 id="patterns-h">Patterns</h1>
      {mayOperate(props.role) && (
        <p>
          <a class="button" href="#/deploy">
            Deploy a pattern
          </a>{" "}
          <a class="button" href="#/build">
            Build a pattern
          </a>
        </p>
      )}
      <Updated at={at} />
      <ErrorBox error={error} />
      {data && data.missing.length > 0 && (
        <p>
          <Status kind="warn">
            Shard{data.missing.length === 1 ? "" : "s"} {data.missing.join(", ")} did not answer: {data.missing.length === 1 ? "its" : "their"} counts are
            missing.
          </Status>
        </p>
      )}
      {data && data.list.length === 0 && <p>No pattern is deployed.</p>}
      {data && data.list.length > 0 && (
        <Table caption="Deployed patterns (counters summed over every shard's leader)">
          <thead>
            <tr>
              <th scope="col">Pattern</th>
              <th scope="col">Version</th>
              <th scope="col">State</th>
              <th scope="col">Sources</th>
              {counters.map(([k, label]) => (
                <th scope="col" key={k}>
                  {label}
                </th>
              ))}
              <th scope="col">Matches per second</th>
            </tr>
          </thead>
          <tbody>
            {data.list.map((p) => {
              const st = data.by.get(p.name);
              const r = rates(history.current.get(p.name) ?? []);
              const last = r.length ? r[r.length - 1] : undefined;
              return (
                <tr key={p.name}>
                  <th scope="row">
                    <a href={"#/patterns/" + encodeURIComponent(p.name)}>{p.name}</a>
                  </th>
                  <td class="num">{fmtNum(p.version)}</td>
                  <td>{stateOf(p)}</td>
                  <td>{p.sources.join(", ")}</td>
                  {counters.map(([k, , trouble]) => {
                    const v = st ? Number(st[k]) : undefined;
                    return (
                      <td class="num" key={k}>
                        {v === undefined ? "—" : trouble && v > 0 ? <Status kind="warn">{fmtNum(v)}</Status> : fmtNum(v)}
                      </td>
                    );
                  })}
                  <td class="rate">
                    <Sparkline
                      values={r}
                      label={
                        r.length
                          ? `Matches per second of ${p.name} over the last ${r.length * 2} seconds, oldest first: ${r.map(fmtRate).join(", ")}`
                          : `No rate of ${p.name} yet`
                      }
                    />{" "}
                    <span class="rate-now">{last === undefined ? "—" : fmtRate(last) + "/s"}</span>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </Table>
      )}
    </section>
  );
}

const recordNames: Record<number, string> = {
  [RecordType.MATCH]: "match",
  [RecordType.TIMEOUT]: "timeout",
  [RecordType.LATE]: "late",
};

export function PatternPage(props: { name: string; role: Role | null }) {
  const { name } = props;
  const { data, error } = usePoll(
    async (signal) => {
      const [got, explained] = await Promise.all([
        patterns.getPattern({ name }, { signal }),
        patterns.explainPattern({ name }, { signal }),
      ]);
      return { got, explained };
    },
    5000,
    [name],
  );
  const [deleted, setDeleted] = useState<string | null>(null);
  const p = data?.got.pattern;
  if (deleted !== null) {
    return (
      <section aria-labelledby="pattern-h">
        <h1 id="pattern-h">{name}</h1>
        <p role="status">
          <Status kind="ok">Deleted.</Status> {deleted}
        </p>
        <p>
          <a href="#/patterns">Back to the patterns</a>
        </p>
      </section>
    );
  }
  return (
    <section aria-labelledby="pattern-h">
      <p>
        <a href="#/patterns">← Patterns</a>
      </p>
      <h1 id="pattern-h">{name}</h1>
      <ErrorBox error={error} />
      {p && (
        <>
          <h2>Automaton</h2>
          {data.explained.warnings.map((w) => (
            <p key={w}>
              <Status kind="warn">{w}</Status>
            </p>
          ))}
          {data.explained.svg && <SVG class="automaton" svg={data.explained.svg} label={data.explained.text} />}
          <details>
            <summary>As text</summary>
            <pre>{data.explained.text}</pre>
          </details>
        </>
      )}
      {p && (
        <div class="pattern-grid">
          <div>
            <h2>Settings</h2>
            <dl class="summary">
              <div>
                <dt>Version</dt>
                <dd>{fmtNum(p.version)}</dd>
              </div>
              <div>
                <dt>State</dt>
                <dd>{stateOf(p)}</dd>
              </div>
              <div>
                <dt>Format</dt>
                <dd>{p.format === SpecFormat.SQL ? "SQL MATCH_RECOGNIZE" : "pattern document"}</dd>
              </div>
              <div>
                <dt>Sources</dt>
                <dd>{p.sources.join(", ")}</dd>
              </div>
              <div>
                <dt>Output subject</dt>
                <dd>{p.outputSubject}</dd>
              </div>
              <div>
                <dt>Records published</dt>
                <dd>{p.records.length ? p.records.map((r) => recordNames[r] ?? String(r)).join(", ") : "all"}</dd>
              </div>
              <div>
                <dt>Max partial matches per key</dt>
                <dd>{p.maxPartialMatches === 0n ? "no bound" : fmtNum(p.maxPartialMatches)}</dd>
              </div>
              <div>
                <dt>From the start of the sources</dt>
                <dd>{p.fromStart ? "yes" : "no"}</dd>
              </div>
              {data.got.pendingShards.length > 0 && (
                <div>
                  <dt>Not running yet on</dt>
                  <dd>
                    <Status kind="warn">shards {data.got.pendingShards.join(", ")}</Status>
                  </dd>
                </div>
              )}
            </dl>
            {mayOperate(props.role) && <DeleteButton name={name} onDeleted={setDeleted} />}
            <Tail name={name} />
          </div>
          <div>
            <h2>Document</h2>
            <pre class="spec" tabIndex={0} aria-label="The pattern's document">
              {p.spec}
            </pre>
          </div>
        </div>
      )}
      {p && <Inspect name={name} />}
    </section>
  );
}

function DeleteButton(props: { name: string; onDeleted: (msg: string) => void }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const del = async () => {
    setBusy(true);
    setErr(null);
    try {
      const r = await patterns.deletePattern({ name: props.name });
      props.onDeleted(r.pendingShards.length ? `Shards ${r.pendingShards.join(", ")} have not dropped it yet.` : "");
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="danger">
      {!asking ? (
        <button type="button" onClick={() => setAsking(true)}>
          Delete pattern…
        </button>
      ) : (
        <p>
          Delete {props.name}? Its partial matches are dropped.{" "}
          <button type="button" class="bad" disabled={busy} onClick={del}>
            Delete {props.name}
          </button>{" "}
          <button type="button" onClick={() => setAsking(false)}>
            Cancel
          </button>
        </p>
      )}
      <ErrorBox error={err} />
    </div>
  );
}

const keep = 500; // records the page keeps, newest first

// Tail follows the pattern's output from the start of what is retained;
// pausing closes the stream and resuming opens it after the last record
// seen, so a paused page holds nothing open on the node. Leaving the page
// closes it too.
function Tail(props: { name: string }) {
  const [recs, setRecs] = useState<OutRecord[]>([]);
  const [paused, setPaused] = useState(false);
  const [filter, setFilter] = useState("");
  const [err, setErr] = useState<unknown>(null);
  const [live, setLive] = useState(false);
  // a pattern's retained output can be long: a person may start at new
  // records instead
  const [from, setFrom] = useState<"all" | "new">("all");
  const next = useRef<bigint>(0n); // sequence to resume at; 0: from `from`
  useEffect(() => {
    if (paused) return;
    const ctl = new AbortController();
    (async () => {
      try {
        const start =
          next.current > 0n
            ? { start: TailStart.SEQUENCE, startSequence: next.current }
            : { start: from === "all" ? TailStart.ALL : TailStart.NEW };
        setLive(true);
        setErr(null);
        for await (const r of matches.tail({ pattern: props.name, ...start }, { signal: ctl.signal })) {
          next.current = r.sequence + 1n;
          setRecs((old) => [r, ...old].slice(0, keep));
        }
      } catch (e) {
        if (!ctl.signal.aborted && !(e instanceof ConnectError && e.code === Code.Canceled)) setErr(e);
      } finally {
        if (!ctl.signal.aborted) setLive(false);
      }
    })();
    return () => ctl.abort();
  }, [props.name, paused, from]);
  const restart = (f: "all" | "new") => {
    next.current = 0n;
    setRecs([]);
    setFrom(f);
  };
  const shown = filter ? recs.filter((r) => r.key.includes(filter)) : recs;
  return (
    <section aria-labelledby="tail-h" class="tail">
      <h2 id="tail-h">Live output</h2>
      <div class="toolbar">
        <label>
          Filter by key <input type="search" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
        </label>
        <label>
          From{" "}
          <select value={from} onChange={(e) => restart(e.currentTarget.value as "all" | "new")}>
            <option value="all">everything retained</option>
            <option value="new">new records only</option>
          </select>
        </label>
        <button type="button" aria-pressed={paused} onClick={() => setPaused(!paused)}>
          {paused ? "Resume" : "Pause"}
        </button>
        <span role="status" class="tail-state">
          {paused ? "Paused" : live ? "Following" : "Stopped"} — {shown.length} record{shown.length === 1 ? "" : "s"}
          {filter ? ` of ${recs.length}` : ""}
        </span>
      </div>
      <ErrorBox error={err} />
      <ol class="records" reversed>
        {shown.map((r) => (
          <li key={r.id} class={"record " + r.type}>
            <details>
              <summary>
                <span class="rtype">{r.type}</span> <span class="rkey">{r.key}</span> <span class="rseq">#{r.sequence.toString()}</span>
              </summary>
              <pre>{pretty(r.json)}</pre>
            </details>
          </li>
        ))}
      </ol>
    </section>
  );
}

// pretty indents a record's JSON, unless that would round an integer
// beyond 2^53: then it shows it as published.
function pretty(b: Uint8Array): string {
  const s = new TextDecoder().decode(b);
  if (/\d{16,}/.test(s)) return s;
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch {
    return s;
  }
}

export function DeployPage(props: { role: Role | null }) {
  const [spec, setSpec] = useState("");
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const [warnings, setWarnings] = useState<string[]>([]);
  const [done, setDone] = useState<string | null>(null);
  const [valid, setValid] = useState<string | null>(null); // the spec last found valid
  const v = useValidation();
  const drawn = useExplained(spec, name);
  if (!mayOperate(props.role)) {
    return (
      <section>
        <h1>Deploy a pattern</h1>
        <p>Deploying needs an operator's or an admin's token.</p>
      </section>
    );
  }
  const check = async (deploy: boolean) => {
    setBusy(true);
    setErr(null);
    setWarnings([]);
    setDone(null);
    setValid(null);
    try {
      if (!(await v.validate(spec, name))) return;
      if (!deploy) {
        setValid(spec);
        return;
      }
      const r = await patterns.deployPattern({ spec, name });
      setWarnings(r.warnings);
      setDone(r.pattern?.name ?? name);
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="deploy-h">
      <h1 id="deploy-h">Deploy a pattern</h1>
      <p>
        <a href="#/build">Build one step by step instead</a>
      </p>
      <div class="pattern-grid">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            check(true);
          }}
          class="deploy"
        >
          <label for="spec">Pattern document (YAML or JSON) or SQL MATCH_RECOGNIZE query</label>
          <textarea
            id="spec"
            ref={v.ta}
            rows={18}
            spellcheck={false}
            value={spec}
            onInput={(e) => setSpec(e.currentTarget.value)}
            aria-describedby={v.problem ? "spec-problem" : undefined}
            aria-invalid={v.problem ? true : undefined}
            required
          />
          <label for="pname">Name (optional for a document: its own; required for SQL)</label>
          <input id="pname" value={name} onInput={(e) => setName(e.currentTarget.value)} />
          <div class="toolbar">
            <button type="button" disabled={busy} onClick={() => check(false)}>
              Validate
            </button>
            <button type="submit" disabled={busy}>
              Validate and deploy
            </button>
          </div>
          {v.problem && <SpecProblem id="spec-problem" spec={v.problem.spec} error={v.problem.error} />}
          {valid !== null && valid === spec && (
            <p role="status">
              <Status kind="ok">Valid</Status>
            </p>
          )}
          <ErrorBox error={v.err ?? err} />
          {warnings.map((w) => (
            <p key={w}>
              <Status kind="warn">{w}</Status>
            </p>
          ))}
          {done && (
            <p role="status">
              <Status kind="ok">Deployed</Status> <a href={"#/patterns/" + encodeURIComponent(done)}>{done}</a>
            </p>
          )}
        </form>
        <DraftAutomaton drawn={drawn} spec={spec} invalid={v.problem?.spec === spec} />
      </div>
    </section>
  );
}

export { errorText };
