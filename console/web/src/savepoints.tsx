// The savepoints page: the savepoints the cluster has recorded and, for an
// operator, writing a new one.
import { useState } from "preact/hooks";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { mayOperate, savepoints, type Role } from "./api";
import type { Savepoint } from "./gen/cep/v1/savepoint_pb";
import { ErrorBox, Status, Table, Updated, fmtMs, fmtNum, usePoll } from "./ui";

// inside the node's savepoint directory (cepnode --savepoint-dir)
const defaultTarget = "dir://console";

export function SavepointsPage(props: { role: Role | null }) {
  const [seq, setSeq] = useState(0); // a new savepoint lists again at once
  const { data, error, at } = usePoll((signal) => savepoints.listSavepoints({}, { signal }), 5000, [seq]);
  const list = data?.savepoints ?? [];
  return (
    <section aria-labelledby="savepoints-h">
      <h1 id="savepoints-h">Savepoints</h1>
      {mayOperate(props.role) && <CreateSavepoint onCreated={() => setSeq(seq + 1)} />}
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
              </tr>
            ))}
          </tbody>
        </Table>
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
