// The savepoints page: the savepoints the cluster has recorded and, for an
// operator, writing a new one.
import { useState } from "preact/hooks";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { mayOperate, savepoints, type Role } from "./api";
import { PositionMapping, type RestoreSavepointResponse, type Savepoint } from "./gen/cep/v1/savepoint_pb";
import { ErrorBox, Status, Table, Updated, fmtMs, fmtNum, usePoll } from "./ui";

// inside the node's savepoint directory (cepnode --savepoint-dir)
const defaultTarget = "dir://console";

export function SavepointsPage(props: { role: Role | null }) {
  const [seq, setSeq] = useState(0); // a new savepoint lists again at once
  const [restoring, setRestoring] = useState<Savepoint | null>(null);
  const operator = mayOperate(props.role);
  const { data, error, at } = usePoll((signal) => savepoints.listSavepoints({}, { signal }), 5000, [seq]);
  const list = data?.savepoints ?? [];
  return (
    <section aria-labelledby="savepoints-h">
      <h1 id="savepoints-h">Savepoints</h1>
      {operator && <CreateSavepoint onCreated={() => setSeq(seq + 1)} />}
      <Updated at={at} />
      <ErrorBox error={error} />
      {data && list.length === 0 && <p>No savepoint is recorded.</p>}
      {list.length > 0 && (
        <Table caption="Savepoints, newest first">
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Location</th>
              <th scope="col">Created</th>
              <th scope="col">Shards</th>
              <th scope="col">Key groups</th>
              <th scope="col">Patterns</th>
              <th scope="col">Source positions</th>
              {operator && <th scope="col">Restore</th>}
            </tr>
          </thead>
          <tbody>
            {list.map((s) => (
              <tr key={s.id}>
                <th scope="row">{s.id}</th>
                <td>
                  <code>{s.location}</code>
                </td>
                <td>{created(s)}</td>
                <td class="num">{s.shardCount}</td>
                <td class="num">{s.keyGroups}</td>
                <td>{s.patternVersions.map((p) => `${p.name} v${p.version}`).join(", ") || "none"}</td>
                <td>{s.sourcePositions.map((p) => `${p.source} at ${fmtNum(p.sequence)}`).join(", ") || "none"}</td>
                {operator && (
                  <td>
                    <button type="button" aria-label={`Restore savepoint ${s.id}…`} onClick={() => setRestoring(s)}>
                      Restore…
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      {operator && restoring && (
        <RestoreSavepoint key={restoring.id} sp={restoring} onClose={() => setRestoring(null)} onRestored={() => setSeq(seq + 1)} />
      )}
    </section>
  );
}

function created(s: Savepoint): string {
  const t = s.createdTime ? fmtMs(timestampDate(s.createdTime).getTime()) : "—";
  return `${t} (index ${fmtNum(s.createdIndex)})`;
}

// CreateSavepoint asks before it writes: a savepoint pauses every shard at
// its barrier while it writes its state.
function CreateSavepoint(props: { onCreated: () => void }) {
  const [target, setTarget] = useState(defaultTarget);
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const create = async () => {
    setBusy(true);
    setErr(null);
    setDone(null);
    try {
      const r = await savepoints.createSavepoint({ target });
      setDone(r.savepoint?.id ?? "");
      setAsking(false);
      props.onCreated();
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="create-savepoint">
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          setAsking(true);
        }}
      >
        <label>
          Target <input id="sp-target" value={target} onInput={(e) => setTarget(e.currentTarget.value)} required spellcheck={false} />
        </label>
        <button type="submit" disabled={asking || busy}>
          Create savepoint…
        </button>
      </form>
      {asking && (
        <p>
          Write a savepoint of every shard's state to <code>{target}</code>?{" "}
          <button type="button" class="bad" disabled={busy} onClick={create}>
            Create it
          </button>{" "}
          <button type="button" disabled={busy} onClick={() => setAsking(false)}>
            Cancel
          </button>
        </p>
      )}
      <ErrorBox error={err} />
      {done !== null && (
        <p role="status">
          <Status kind="ok">Created</Status> savepoint {done}
        </p>
      )}
    </div>
  );
}

// The position choices of a restore, as `cepctl savepoint restore
// --positions` names them: where a source whose stream is not the saved
// one is read from.
const positionChoices: [PositionMapping, string][] = [
  [PositionMapping.UNSPECIFIED, "refuse the restore (the default)"],
  [PositionMapping.KEEP, "keep: after the saved sequence anyway"],
  [PositionMapping.FROM_START, "from-start: the stream's first message on"],
  [PositionMapping.FROM_END, "from-end: only what is published after the restore"],
  [PositionMapping.FROM_TIME, "from-time: the first message stored at or after a time"],
];

// RestoreSavepoint asks before it replaces the cluster's patterns,
// positions and state with the savepoint's. A restore refused because a
// source's stream changed says so at the position choice, which it then
// needs.
function RestoreSavepoint(props: { sp: Savepoint; onClose: () => void; onRestored: () => void }) {
  const { sp } = props;
  const [positions, setPositions] = useState(PositionMapping.UNSPECIFIED);
  const [from, setFrom] = useState("");
  const [shards, setShards] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const [needsChoice, setNeedsChoice] = useState(false);
  const [done, setDone] = useState<RestoreSavepointResponse | null>(null);
  const restore = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr(null);
    setDone(null);
    try {
      const fromTime = positions === PositionMapping.FROM_TIME ? new Date(from) : null;
      if (fromTime && isNaN(fromTime.getTime())) throw new Error("from-time: give the time of the first message to read");
      const r = await savepoints.restoreSavepoint({
        savepoint: { case: "id", value: sp.id },
        shardCount: shards ? Number(shards) : 0,
        positions,
        positionsFrom: fromTime ? timestampFromDate(fromTime) : undefined,
      });
      setDone(r);
      setNeedsChoice(false);
      props.onRestored();
    } catch (e) {
      // the node refuses a restore whose source streams changed, naming
      // them, until a position choice is made
      setNeedsChoice(e instanceof ConnectError && e.code === Code.FailedPrecondition && /stream/i.test(e.rawMessage) && positions === PositionMapping.UNSPECIFIED);
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="restore" aria-labelledby="restore-h">
      <h2 id="restore-h">Restore savepoint {sp.id}</h2>
      {done ? (
        <>
          <p role="status">
            <Status kind="ok">Restored</Status> savepoint {done.savepoint?.id ?? sp.id} into {done.shardCount} shard{done.shardCount === 1 ? "" : "s"} (metadata index{" "}
            {fmtNum(done.restoredIndex)}).
            {done.pendingShards.length > 0 && ` Shards ${done.pendingShards.join(", ")} restore once they have a leader.`}
          </p>
          {done.sourcePositions.length > 0 && (
            <p>Sources read from: {done.sourcePositions.map((p) => `${p.source} after ${fmtNum(p.sequence)}`).join(", ")}</p>
          )}
          <button type="button" onClick={props.onClose}>
            Close
          </button>
        </>
      ) : (
        <form onSubmit={restore} class="restore-form">
          <p>
            Replace every pattern, source position and pattern state of the cluster with those of <code>{sp.location}</code>? What happened since
            it was written is lost.
          </p>
          <label for="restore-positions">Where a source whose stream is not the saved one is read from</label>
          <select
            id="restore-positions"
            value={String(positions)}
            onChange={(e) => setPositions(Number(e.currentTarget.value) as PositionMapping)}
            aria-invalid={needsChoice ? true : undefined}
            aria-describedby={needsChoice ? "restore-needs" : undefined}
          >
            {positionChoices.map(([v, label]) => (
              <option value={String(v)} key={v}>
                {label}
              </option>
            ))}
          </select>
          {needsChoice && (
            <p id="restore-needs">
              <Status kind="warn">This restore needs a position choice: a source's stream is not the one its saved positions count in.</Status>
            </p>
          )}
          {positions === PositionMapping.FROM_TIME && (
            <>
              <label for="restore-from">First message stored at or after (your local time)</label>
              <input id="restore-from" type="datetime-local" step="1" value={from} onInput={(e) => setFrom(e.currentTarget.value)} required />
            </>
          )}
          <label for="restore-shards">Shards to restore into (empty: the savepoint's {sp.shardCount})</label>
          <input id="restore-shards" type="number" min="1" value={shards} onInput={(e) => setShards(e.currentTarget.value)} />
          <div class="toolbar">
            <button type="submit" class="bad" disabled={busy}>
              Restore {sp.id}
            </button>
            <button type="button" disabled={busy} onClick={props.onClose}>
              Cancel
            </button>
          </div>
        </form>
      )}
      <ErrorBox error={err} />
    </section>
  );
}
