// The sources page: the cluster's sources and the latest dead letters,
// with their reasons.
import { useEffect, useState } from "preact/hooks";
import { Code, ConnectError } from "@connectrpc/connect";
import { matches, sources } from "./api";
import { TailStart, type Record as OutRecord } from "./gen/cep/v1/match_pb";
import { ErrorBox, Table, Updated, fmtMs, usePoll } from "./ui";

export function SourcesPage() {
  const { data, error, at } = usePoll((signal) => sources.listSources({}, { signal }), 5000, []);
  const list = data?.sources ?? [];
  return (
    <section aria-labelledby="sources-h">
      <h1 id="sources-h">Sources and dead letters</h1>
      <Updated at={at} />
      <ErrorBox error={error} />
      {data && list.length === 0 && <p>No source is defined.</p>}
      {list.length > 0 && (
        <Table caption="Sources">
          <thead>
            <tr>
              <th scope="col">Source</th>
              <th scope="col">Key</th>
              <th scope="col">Stream</th>
              <th scope="col">Subjects</th>
              <th scope="col">Schema</th>
            </tr>
          </thead>
          <tbody>
            {list.map((s) => (
              <tr key={s.name}>
                <th scope="row">{s.name}</th>
                <td>
                  <code>{s.key || "the subject's last token"}</code>
                </td>
                <td>{s.stream}</td>
                <td>{s.subjects.join(", ")}</td>
                <td>
                  {s.fields.length === 0
                    ? "none declared"
                    : s.fields.map((f) => `${f.path}: ${f.type}${f.optional ? "?" : ""}`).join(", ")}
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      <DeadLetters names={list.map((s) => s.name)} />
    </section>
  );
}

// Dead letters arrive from the start of what is retained, but the page
// keeps only the latest `last`: their stream is long-lived and may be long.
function DeadLetters(props: { names: string[] }) {
  const [source, setSource] = useState("");
  const [last, setLast] = useState(50);
  const [recs, setRecs] = useState<OutRecord[]>([]);
  const [live, setLive] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  useEffect(() => {
    const ctl = new AbortController();
    setRecs([]);
    (async () => {
      try {
        setLive(true);
        setErr(null);
        for await (const r of matches.tail({ deadLetters: true, deadLetterSource: source, start: TailStart.ALL }, { signal: ctl.signal })) {
          setRecs((old) => [r, ...old].slice(0, last));
        }
      } catch (e) {
        if (!ctl.signal.aborted && !(e instanceof ConnectError && e.code === Code.Canceled)) setErr(e);
      } finally {
        if (!ctl.signal.aborted) setLive(false);
      }
    })();
    // leaving the page (or changing the filter) closes the stream
    return () => ctl.abort();
  }, [source, last]);
  return (
    <section aria-labelledby="dl-h" class="deadletters">
      <h2 id="dl-h">Dead letters</h2>
      <div class="toolbar">
        <label>
          Source{" "}
          <select id="dl-source" value={source} onChange={(e) => setSource(e.currentTarget.value)}>
            <option value="">all sources</option>
            {props.names.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <label>
          Latest{" "}
          <select id="dl-last" value={String(last)} onChange={(e) => setLast(Number(e.currentTarget.value))}>
            {[20, 50, 200, 500].map((n) => (
              <option key={n} value={String(n)}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <span role="status" class="dl-state">
          {live ? "Following" : "Stopped"} — {recs.length} dead letter{recs.length === 1 ? "" : "s"}
        </span>
      </div>
      <ErrorBox error={err} />
      {recs.length > 0 && (
        <Table caption="Latest dead letters, newest first">
          <thead>
            <tr>
              <th scope="col">Stored</th>
              <th scope="col">Source</th>
              <th scope="col">Pattern</th>
              <th scope="col">Reason</th>
              <th scope="col">Event</th>
            </tr>
          </thead>
          <tbody>
            {recs.map((r) => {
              const d = deadLetter(r);
              return (
                <tr key={String(r.sequence)}>
                  <td>{fmtMs(r.storedAtMs)}</td>
                  <td>{d.source}</td>
                  <td>{d.pattern}</td>
                  <td class="dl-reason">{d.reason}</td>
                  <td>
                    <code class="dl-data">{d.data}</code>
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

// deadLetter reads the fields a dead letter's JSON has (source, pattern,
// reason, data); what is not JSON is shown as it is.
function deadLetter(r: OutRecord): { source: string; pattern: string; reason: string; data: string } {
  const text = new TextDecoder().decode(r.json);
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    return { source: str(o.source), pattern: str(o.pattern), reason: str(o.reason), data: o.data === undefined ? "" : JSON.stringify(o.data) };
  } catch {
    return { source: "", pattern: "", reason: "", data: text };
  }
}

function str(v: unknown): string {
  return typeof v === "string" ? v : v === undefined ? "" : JSON.stringify(v);
}
