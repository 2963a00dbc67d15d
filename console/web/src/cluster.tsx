// The cluster page: nodes and shards, polled every two seconds.
import { cluster, nodeMetrics, type Sample } from "./api";
import { NodeState, Suffrage, type Node, type Shard } from "./gen/cep/v1/cluster_pb";
import { ErrorBox, Status, Table, Updated, fmtMs, fmtNum, usePoll } from "./ui";

const every = 2000;

export function ClusterPage() {
  const { data, error, at } = usePoll(
    async (signal) => {
      const [status, shards, metrics] = await Promise.all([
        cluster.getStatus({}, { signal }),
        cluster.listShards({ clusterWide: true }, { signal }),
        nodeMetrics().catch(() => null), // extras only: the page works without
      ]);
      return { status, shards: shards.shards, metrics };
    },
    every,
    [],
  );
  const s = data?.status.summary;
  return (
    <section aria-labelledby="cluster-h">
      <h1 id="cluster-h">Cluster</h1>
      <Updated at={at} />
      <ErrorBox error={error} />
      {s && (
        <dl class="summary">
          <div>
            <dt>Nodes</dt>
            <dd>
              {s.nodes} ({s.alive} alive{s.suspect > 0 && <>, <Status kind="warn">{s.suspect} suspect</Status></>}
              {s.dead > 0 && <>, <Status kind="bad">{s.dead} dead</Status></>})
            </dd>
          </div>
          <div>
            <dt>Metadata leader</dt>
            <dd>{s.metaLeaderId ? s.metaLeaderId : <Status kind="bad">none</Status>}</dd>
          </div>
          <div>
            <dt>Shards</dt>
            <dd>
              {s.shards}
              {s.shardsWithoutLeader > 0 && <> — <Status kind="bad">{s.shardsWithoutLeader} without a leader</Status></>}
            </dd>
          </div>
          <div>
            <dt>Patterns</dt>
            <dd>{s.patterns}</dd>
          </div>
          <div>
            <dt>Sources</dt>
            <dd>{s.sources}</dd>
          </div>
          <div>
            <dt>Key groups</dt>
            <dd>{s.keyGroups}</dd>
          </div>
          {s.natsUrl && (
            <div>
              <dt>NATS</dt>
              <dd>{s.natsUrl}</dd>
            </div>
          )}
          <div>
            <dt>Versions</dt>
            <dd>
              <Versions nodes={data?.status.nodes ?? []} />
            </dd>
          </div>
          {s.insecure && (
            <div>
              <dt>Security</dt>
              <dd>
                <Status kind="warn">insecure: no cluster secret</Status>
              </dd>
            </div>
          )}
        </dl>
      )}
      {data && <Nodes nodes={data.status.nodes} shards={data.shards} />}
      {data && <Shards shards={data.shards} metrics={data.metrics} />}
    </section>
  );
}

// Versions names the builds the nodes run: more than one is an upgrade
// under way (or one left half done).
function Versions(props: { nodes: Node[] }) {
  const vs = [...new Set(props.nodes.map((n) => n.version || "not said"))].sort();
  if (vs.length <= 1) return <>{vs[0] ?? "—"}</>;
  return <Status kind="warn">mixed: {vs.join(", ")}</Status>;
}

function nodeState(n: Node) {
  switch (n.state) {
    case NodeState.ALIVE:
      return n.removing ? <Status kind="warn">alive, removing</Status> : <Status kind="ok">alive</Status>;
    case NodeState.SUSPECT:
      return <Status kind="warn">suspect</Status>;
    case NodeState.DEAD:
      return <Status kind="bad">dead</Status>;
  }
  return <Status kind="warn">unknown</Status>;
}

// natsOf says whether a node reaches NATS as its replicas last reported.
function natsOf(id: string, shards: Shard[]) {
  let seen = false;
  for (const sh of shards) {
    for (const r of sh.replicas) {
      if (r.nodeId !== id || r.appliedUnknown) continue;
      if (r.natsUnreachable) return <Status kind="bad">unreachable</Status>;
      seen = true;
    }
  }
  return seen ? <Status kind="ok">reachable</Status> : <span>not reported</span>;
}

function Nodes(props: { nodes: Node[]; shards: Shard[] }) {
  return (
    <Table caption="Nodes">
      <thead>
        <tr>
          <th scope="col">Node</th>
          <th scope="col">State</th>
          <th scope="col">Metadata</th>
          <th scope="col">NATS</th>
          <th scope="col">Replicas</th>
          <th scope="col">Version</th>
          <th scope="col">API</th>
          <th scope="col">Raft</th>
        </tr>
      </thead>
      <tbody>
        {props.nodes.map((n) => (
          <tr key={n.id}>
            <th scope="row">{n.id}</th>
            <td>{nodeState(n)}</td>
            <td>{n.isMetaLeader ? "leader" : "follower"}</td>
            <td>{natsOf(n.id, props.shards)}</td>
            <td class="num">{n.replicas}</td>
            <td>{n.version || "not said"}</td>
            <td>{n.apiAddress}</td>
            <td>{n.address}</td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

function lagOf(m: Sample[] | null, shard: number): Map<string, number> | null {
  if (!m) return null;
  const out = new Map<string, number>();
  for (const x of m) {
    if (x.name === "cep_ingest_lag_messages" && x.labels.shard === String(shard)) out.set(x.labels.source, x.value);
  }
  return out;
}

function Shards(props: { shards: Shard[]; metrics: Sample[] | null }) {
  return (
    <Table caption="Shards">
      <thead>
        <tr>
          <th scope="col">Shard</th>
          <th scope="col">Key groups</th>
          <th scope="col">Leader</th>
          <th scope="col">Replicas (applied index)</th>
          <th scope="col">Commit / applied</th>
          <th scope="col">Partial matches</th>
          <th scope="col">Ingest lag</th>
          <th scope="col">Watermarks</th>
        </tr>
      </thead>
      <tbody>
        {props.shards.map((sh) => {
          const lag = lagOf(props.metrics, sh.id);
          return (
            <tr key={sh.id}>
              <th scope="row">{sh.id}</th>
              <td>
                {sh.keyGroups?.first}–{sh.keyGroups?.last}
              </td>
              <td>
                {sh.leaderNodeId || <Status kind="bad">no leader</Status>}
                {sh.quarantined && (
                  <div>
                    <Status kind="bad">quarantined: {sh.quarantined}</Status>
                  </div>
                )}
                {sh.natsUnreachableMs > 0n && (
                  <div>
                    <Status kind="bad">NATS unreachable for {fmtNum(sh.natsUnreachableMs)} ms</Status>
                  </div>
                )}
                {sh.unreadStreams.map((u) => (
                  <div key={u}>
                    <Status kind="warn">not read: {u}</Status>
                  </div>
                ))}
              </td>
              <td>
                <ul class="plain">
                  {sh.replicas.map((r) => (
                    <li key={r.nodeId}>
                      {r.nodeId} {r.suffrage === Suffrage.NONVOTER ? "(non-voter) " : ""}
                      {r.appliedUnknown ? <Status kind="warn">not reported</Status> : fmtNum(r.appliedIndex)}
                      {r.natsUnreachable && (
                        <>
                          {" "}
                          <Status kind="bad">NATS unreachable</Status>
                        </>
                      )}
                      {r.quarantined && (
                        <>
                          {" "}
                          <Status kind="bad">quarantined: {r.quarantined}</Status>
                        </>
                      )}
                    </li>
                  ))}
                </ul>
              </td>
              <td class="num">
                {fmtNum(sh.commitIndex)} / {fmtNum(sh.lastAppliedIndex)}
              </td>
              <td class="num">{fmtNum(sh.partialMatches)}</td>
              <td>
                {lag === null ? (
                  "—"
                ) : lag.size === 0 ? (
                  <span title="reported by the shard's leader">not on this node</span>
                ) : (
                  <ul class="plain">
                    {[...lag].sort().map(([src, v]) => (
                      <li key={src}>
                        {src}: {fmtNum(v)}
                      </li>
                    ))}
                  </ul>
                )}
              </td>
              <td>
                {sh.clocks.length === 0 ? (
                  "—"
                ) : (
                  <ul class="plain">
                    {sh.clocks.map((c) => (
                      <li key={c.pattern + "/" + c.source}>
                        {c.pattern}/{c.source}: {c.hasWatermark ? fmtMs(c.watermarkMs) : "none yet"}
                        {c.idleKnown && c.idle ? " (idle)" : ""}
                      </li>
                    ))}
                  </ul>
                )}
              </td>
            </tr>
          );
        })}
      </tbody>
    </Table>
  );
}
