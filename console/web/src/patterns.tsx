// The pattern pages: the list, one pattern (document, automaton, live
// output), and deploying one.
import { useEffect, useRef, useState } from "preact/hooks";
import { Code, ConnectError } from "@connectrpc/connect";
import { matches, nodeMetrics, patterns, sumBy, type Role, mayOperate } from "./api";
import { PatternState, RecordType, SpecFormat, type Pattern } from "./gen/cep/v1/pattern_pb";
import { TailStart, type Record as OutRecord } from "./gen/cep/v1/match_pb";
import { ErrorBox, Status, Table, Updated, errorText, fmtNum, usePoll, SVG } from "./ui";
import { Inspect } from "./inspect";

const counters: [string, string][] = [
  ["cep_pattern_matches_total", "Matches"],
  ["cep_pattern_timeouts_total", "Timeouts"],
  ["cep_pattern_late_events_total", "Late"],
  ["cep_pattern_dead_lettered_total", "Dead letters"],
  ["cep_pattern_partial_matches", "Partial matches"],
  ["cep_condition_errors_total", "Condition errors"],
];

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
  const { data, error, at } = usePoll(
    async (signal) => {
      const [list, metrics] = await Promise.all([
        patterns.listPatterns({}, { signal }),
        nodeMetrics().catch(() => null),
      ]);
      const sums = metrics ? counters.map(([m]) => sumBy(metrics, m, "pattern")) : null;
      return { list: list.patterns, sums };
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
          </a>
        </p>
      )}
      <Updated at={at} />
      <ErrorBox error={error} />
      {data && data.list.length === 0 && <p>No pattern is deployed.</p>}
      {data && data.list.length > 0 && (
        <Table caption="Deployed patterns (counters of the shards this node leads)">
          <thead>
            <tr>
              <th scope="col">Pattern</th>
              <th scope="col">Version</th>
              <th scope="col">State</th>
              <th scope="col">Sources</th>
              {counters.map(([m, label]) => (
                <th scope="col" key={m}>
                  {label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {data.list.map((p) => (
              <tr key={p.name}>
                <th scope="row">
                  <a href={"#/patterns/" + encodeURIComponent(p.name)}>{p.name}</a>
                </th>
                <td class="num">{fmtNum(p.version)}</td>
                <td>{stateOf(p)}</td>
                <td>{p.sources.join(", ")}</td>
                {counters.map(([m], i) => {
                  const v = data.sums?.[i].get(p.name);
                  const bad = v !== undefined && v > 0 && (m === "cep_condition_errors_total" || m === "cep_pattern_dead_lettered_total");
                  return (
                    <td class="num" key={m}>
                      {data.sums === null ? "—" : bad ? <Status kind="warn">{fmtNum(v)}</Status> : fmtNum(v ?? 0)}
                    </td>
                  );
                })}
              </tr>
            ))}
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
  const [problem, setProblem] = useState<string | null>(null);
  const [warnings, setWarnings] = useState<string[]>([]);
  const [done, setDone] = useState<string | null>(null);
  if (!mayOperate(props.role)) {
    return (
      <section>
        <h1>Deploy a pattern</h1>
        <p>Deploying needs an operator's or an admin's token.</p>
      </section>
    );
  }
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr(null);
    setProblem(null);
    setWarnings([]);
    setDone(null);
    try {
      const v = await patterns.validatePattern({ spec, name });
      if (!v.valid) {
        setProblem(v.error?.message ?? "the pattern is not valid");
        return;
      }
      const r = await patterns.deployPattern({ spec, name });
      setWarnings(r.warnings);
      setDone(r.pattern?.name ?? v.name);
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="deploy-h">
      <h1 id="deploy-h">Deploy a pattern</h1>
      <form onSubmit={submit} class="deploy">
        <label for="spec">Pattern document (YAML or JSON) or SQL MATCH_RECOGNIZE query</label>
        <textarea id="spec" rows={18} spellcheck={false} value={spec} onInput={(e) => setSpec(e.currentTarget.value)} required />
        <label for="pname">Name (optional: the document's own)</label>
        <input id="pname" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <div>
          <button type="submit" disabled={busy}>
            Validate and deploy
          </button>
        </div>
      </form>
      {problem && (
        <p class="error" role="alert">
          <Status kind="bad">Not valid: {problem}</Status>
        </p>
      )}
      <ErrorBox error={err} />
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
    </section>
  );
}

export { errorText };
