// A key's inside: what a deployed pattern holds for one key now
// (PatternService.InspectKey), as `cepctl pattern inspect` prints it.
import { useState } from "preact/hooks";
import { patterns } from "./api";
import type { InspectedEvent, InspectKeyResponse, PartialMatch } from "./gen/cep/v1/pattern_pb";
import { ErrorBox, Table, fmtMs, fmtNum } from "./ui";

const defaultLimit = 100;

export function Inspect(props: { name: string }) {
  const [key, setKey] = useState("");
  const [limit, setLimit] = useState(String(defaultLimit));
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const [got, setGot] = useState<InspectKeyResponse | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr(null);
    setGot(null);
    try {
      // an empty or bad limit is the server's default; the server refuses
      // one over its maximum with a reason the page shows
      const n = Number(limit);
      const r = await patterns.inspectKey({ name: props.name, key, limit: Number.isInteger(n) && n > 0 ? n : 0 });
      setGot(r);
    } catch (e) {
      setGot(null);
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="inspect-h" class="inspect">
      <h2 id="inspect-h">A key's inside</h2>
      <form class="toolbar" onSubmit={submit}>
        <label>
          Key <input id="inspect-key" value={key} onInput={(e) => setKey(e.currentTarget.value)} placeholder="acc-3" />
        </label>
        <label>
          Limit{" "}
          <input id="inspect-limit" type="number" min={1} max={10000} value={limit} onInput={(e) => setLimit(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Inspect
        </button>
      </form>
      <ErrorBox error={err} />
      {got && <Inspection x={got} />}
    </section>
  );
}

function Inspection(props: { x: InspectKeyResponse }) {
  const { x } = props;
  return (
    <div class="inspection" role="status">
      <dl class="summary">
        <div>
          <dt>Key</dt>
          <dd class="ikey">{x.key === "" ? "(none)" : x.key}</dd>
        </div>
        <div>
          <dt>Version</dt>
          <dd>{fmtNum(x.version)}</dd>
        </div>
        <div>
          <dt>Shard (key group)</dt>
          <dd>
            {x.shardId} ({x.keyGroup})
          </dd>
        </div>
        <div>
          <dt>Answered by</dt>
          <dd>{x.leaderNodeId}</dd>
        </div>
        <div>
          <dt>Watermark</dt>
          <dd class="iwatermark">{x.hasWatermark ? fmtMs(x.watermarkMs) : "none yet"}</dd>
        </div>
        {x.clocks.map((c) => (
          <div key={c.source}>
            <dt>Clock of {c.source}</dt>
            <dd>
              {c.hasWatermark ? fmtMs(c.watermarkMs) : "none"}; newest event {c.hasNewestEvent ? fmtMs(c.newestEventMs) : "none"}
            </dd>
          </div>
        ))}
      </dl>
      <Held pms={x.partialMatches} count={x.partialMatchCount} buffered={x.bufferedEvents} bcount={x.bufferedEventCount} />
      {x.draining.map((d) => (
        <div class="draining" key={String(d.version)}>
          <h3>Version {fmtNum(d.version)}, draining</h3>
          <Held pms={d.partialMatches} count={d.partialMatchCount} buffered={d.bufferedEvents} bcount={d.bufferedEventCount} />
        </div>
      ))}
    </div>
  );
}

function shown(n: number, count: bigint): string {
  return BigInt(n) < count ? ` (the first ${n} shown)` : "";
}

function plural(n: bigint, one: string, many: string): string {
  return `${fmtNum(n)} ${n === 1n ? one : many}`;
}

// Held lists partial matches, each with its events, and the events
// waiting for the watermark; the counts say how many there are beyond the
// limit.
function Held(props: { pms: PartialMatch[]; count: bigint; buffered: InspectedEvent[]; bcount: bigint }) {
  return (
    <>
      <h3 class="pm-count">
        {plural(props.count, "partial match", "partial matches")}
        {shown(props.pms.length, props.count)}
      </h3>
      {props.pms.map((pm, i) => (
        <div class="pm" key={i}>
          <p class="pm-head">
            #{i + 1} state <strong class="pm-state">{pm.state}</strong>
            {pm.stage !== pm.state && <> (stage {pm.stage})</>}, start <span class="pm-start">{fmtMs(pm.startMs)}</span>, window
            deadline <span class="pm-deadline">{pm.hasDeadline ? fmtMs(pm.deadlineMs) : "none"}</span>
          </p>
          <Events caption={`Events partial match #${i + 1} took`} events={pm.events} stage />
        </div>
      ))}
      <h3 class="buffered-count">
        {plural(props.bcount, "event", "events")} waiting for the watermark{shown(props.buffered.length, props.bcount)}
      </h3>
      {props.buffered.length > 0 && (
        <div class="buffered">
          <Events caption="Events waiting for the watermark" events={props.buffered} />
        </div>
      )}
    </>
  );
}

function Events(props: { caption: string; events: InspectedEvent[]; stage?: boolean }) {
  return (
    <Table caption={props.caption}>
      <thead>
        <tr>
          {props.stage && <th scope="col">Stage</th>}
          <th scope="col">Time</th>
          <th scope="col">Sequence</th>
          <th scope="col">Event</th>
        </tr>
      </thead>
      <tbody>
        {props.events.map((e, i) => (
          <tr key={i}>
            {props.stage && <td>{e.stage}</td>}
            <td>{fmtMs(e.timeMs)}</td>
            <td class="num">{e.sequence.toString()}</td>
            <td>
              <code>{new TextDecoder().decode(e.json)}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}
