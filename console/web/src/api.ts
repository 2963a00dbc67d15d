// The node's Connect API, called from the page with the signed-in token.
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ClusterService } from "./gen/cep/v1/cluster_pb";
import { PatternService } from "./gen/cep/v1/pattern_pb";
import { MatchService } from "./gen/cep/v1/match_pb";
import { SourceService } from "./gen/cep/v1/source_pb";
import { SavepointService } from "./gen/cep/v1/savepoint_pb";

// The token lives in sessionStorage only: it goes with the tab, never to
// disk for longer than the browser session, and never into a cookie.
const tokenKey = "cep.token";

export function getToken(): string {
  return sessionStorage.getItem(tokenKey) ?? "";
}

export function setToken(t: string): void {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

function authHeaders(): Record<string, string> {
  const t = getToken();
  return t ? { Authorization: "Bearer " + t } : {};
}

const auth: Interceptor = (next) => async (req) => {
  const t = getToken();
  if (t) req.header.set("Authorization", "Bearer " + t);
  return next(req);
};

// Same origin: the page calls the node that served it and nothing else.
const transport = createConnectTransport({
  baseUrl: location.origin,
  interceptors: [auth],
});

export const cluster: Client<typeof ClusterService> = createClient(ClusterService, transport);
export const patterns: Client<typeof PatternService> = createClient(PatternService, transport);
export const matches: Client<typeof MatchService> = createClient(MatchService, transport);
export const sources: Client<typeof SourceService> = createClient(SourceService, transport);
export const savepoints: Client<typeof SavepointService> = createClient(SavepointService, transport);

export type Role = "reader" | "operator" | "admin";

// whoami asks the node which role the token has: null when the node does
// not know it (or no token was given and the node wants one).
export async function whoami(): Promise<Role | null> {
  const r = await fetch("/ui/role", { headers: authHeaders(), cache: "no-store" });
  if (!r.ok) throw new Error(`/ui/role: ${r.status} ${r.statusText}`);
  const body = (await r.json()) as { role: Role | "none" };
  return body.role === "none" ? null : body.role;
}

export function mayOperate(r: Role | null): boolean {
  return r === "operator" || r === "admin";
}

// A sample of the node's /metrics: name, labels, value.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

// nodeMetrics reads the node's Prometheus text: the API has no per-pattern
// counters and no ingest lag, /metrics has them for this node's shards.
// null when /metrics refuses the token.
export async function nodeMetrics(): Promise<Sample[] | null> {
  const r = await fetch("/metrics", { headers: authHeaders(), cache: "no-store" });
  if (r.status === 401 || r.status === 403) return null;
  if (!r.ok) throw new Error(`/metrics: ${r.status} ${r.statusText}`);
  return parseMetrics(await r.text());
}

const sampleRe = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("cep_")) continue; // the project's own only
    const m = sampleRe.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(labelRe)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

// ledShards are the shards this node leads: their pattern counters are
// the current ones (other replicas may lag).
export function ledShards(s: Sample[]): Set<string> {
  const led = new Set<string>();
  for (const x of s) if (x.name === "cep_shard_leader" && x.value === 1) led.add(x.labels.shard);
  return led;
}

// sumBy adds metric's values over the shards this node leads, by label.
export function sumBy(s: Sample[], metric: string, label: string): Map<string, number> {
  const led = ledShards(s);
  const m = new Map<string, number>();
  for (const x of s) {
    if (x.name !== metric || !led.has(x.labels.shard)) continue;
    const k = x.labels[label] ?? "";
    m.set(k, (m.get(k) ?? 0) + x.value);
  }
  return m;
}
