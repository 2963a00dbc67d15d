// The pattern builder: a MATCH_RECOGNIZE query as a form (steps with
// quantifiers and conditions, measures, partition, window, after-match
// strategy), written out as SQL, shown and editable, its automaton
// redrawn and its validation errors shown on the part of the form they
// belong to.
import { useEffect, useMemo, useState } from "preact/hooks";
import { mayOperate, patterns, sources, type Role } from "./api";
import { DraftAutomaton, SpecProblem, useExplained } from "./editor";
import type { SpecError } from "./gen/cep/v1/pattern_pb";
import { ErrorBox, Status, usePoll } from "./ui";

export type Cond = { mode: "simple" | "expr"; field: string; op: string; value: string; expr: string };
export type Step = { name: string; description: string; quant: string; n: string; m: string; reluctant: boolean; conds: Cond[] };
export type Measure = { step: string; fn: "" | "FIRST" | "LAST"; expr: string; as: string };
export type Column = { expr: string; as: string };
export type Form = {
  name: string;
  source: string;
  columns: Column[];
  partition: string;
  order: string;
  steps: Step[];
  measures: Measure[];
  withinN: string;
  withinUnit: string;
  after: string;
};

// The quantifiers the reference manual's builder offers, as SQL writes
// them; reluctant (a trailing ?) where a number of rows is open.
export const quantifiers: { v: string; label: string; sql: (s: Step) => string; reluctant: boolean }[] = [
  { v: "1", label: "exactly once", sql: () => "", reluctant: false },
  { v: "+", label: "one or more", sql: () => "+", reluctant: true },
  { v: "2+", label: "two or more", sql: () => "{2,}", reluctant: true },
  { v: "?", label: "optional", sql: () => "?", reluctant: true },
  { v: "*", label: "zero or more", sql: () => "*", reluctant: true },
  { v: "n", label: "exactly n", sql: (s) => `{${s.n || "1"}}`, reluctant: false },
  { v: "nm", label: "between n and m", sql: (s) => `{${s.n || "0"},${s.m}}`, reluctant: true },
];

const ops = ["=", "!=", "<", "<=", ">", ">=", "IS NULL", "IS NOT NULL"];
const units = ["SECOND", "MINUTE", "HOUR", "DAY"];

const newCond = (): Cond => ({ mode: "simple", field: "", op: "=", value: "", expr: "" });
const newStep = (name: string): Step => ({ name, description: "", quant: "1", n: "", m: "", reluctant: false, conds: [newCond()] });

export const emptyForm = (): Form => ({
  name: "",
  source: "",
  columns: [],
  partition: "",
  order: "",
  steps: [newStep("A")],
  measures: [],
  withinN: "",
  withinUnit: "MINUTE",
  after: "PAST LAST ROW",
});

// literal writes a simple condition's value: numbers, booleans, NULL and
// quoted strings as they are, any other text as a string.
function literal(v: string): string {
  const t = v.trim();
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(t) || /^(true|false|null)$/i.test(t) || /^'.*'$/.test(t)) return t;
  return `'${t.replace(/'/g, "''")}'`;
}

function condSQL(step: string, c: Cond): string {
  if (c.mode === "expr") return c.expr.trim();
  const f = `${step}.${c.field.trim()}`;
  return c.op.startsWith("IS") ? `${f} ${c.op}` : `${f} ${c.op} ${literal(c.value)}`;
}

function measureSQL(m: Measure): string {
  const e = m.step ? `${m.step}.${m.expr.trim()}` : m.expr.trim();
  return (m.fn ? `${m.fn}(${e})` : e) + (m.as.trim() ? ` AS ${m.as.trim()}` : "");
}

// toSQL writes the form as a query, and for each of its lines the part
// of the form that wrote it ("" for none), so that an error at a line is
// shown on that part.
export function toSQL(f: Form): { sql: string; parts: string[] } {
  const lines: string[] = [];
  const parts: string[] = [];
  const add = (l: string, part = "") => {
    lines.push(l);
    parts.push(part);
  };
  add("SELECT *");
  const cols = f.columns.filter((c) => c.expr.trim());
  if (cols.length) {
    add("FROM (");
    add("  SELECT");
    cols.forEach((c, i) => add(`    ${c.expr.trim()}${c.as.trim() ? ` AS ${c.as.trim()}` : ""}${i < cols.length - 1 ? "," : ""}`, `column-${f.columns.indexOf(c)}`));
    add(`  FROM ${f.source.trim()}`, "source");
    add(")");
  } else {
    add(`FROM ${f.source.trim()}`, "source");
  }
  add("MATCH_RECOGNIZE (");
  if (f.partition.trim()) add(`    PARTITION BY ${f.partition.trim()}`, "partition");
  if (f.order.trim()) add(`    ORDER BY ${f.order.trim()}`, "order");
  const ms = f.measures.filter((m) => m.expr.trim());
  if (ms.length) {
    add("    MEASURES");
    ms.forEach((m, i) => add(`        ${measureSQL(m)}${i < ms.length - 1 ? "," : ""}`, `measure-${f.measures.indexOf(m)}`));
  }
  add("    ONE ROW PER MATCH");
  add(`    AFTER MATCH SKIP ${f.after}`, "after");
  const pat = f.steps.map((s) => {
    const q = quantifiers.find((x) => x.v === s.quant) ?? quantifiers[0];
    return s.name.trim() + q.sql(s) + (q.reluctant && s.reluctant ? "?" : "");
  });
  add(`    PATTERN (${pat.join(" ")})`, "pattern");
  if (f.withinN.trim()) add(`    WITHIN INTERVAL '${f.withinN.trim()}' ${f.withinUnit}`, "within");
  const defined = f.steps.map((s, i) => ({ s, i, conds: s.conds.map((c, j) => ({ c, j })).filter(({ c }) => (c.mode === "expr" ? c.expr.trim() : c.field.trim())) }));
  const withConds = defined.filter((d) => d.conds.length);
  if (withConds.length) {
    add("    DEFINE");
    withConds.forEach((d, k) => {
      if (d.s.description.trim()) add(`        -- ${d.s.description.trim().replace(/\n/g, " ")}`, `step-${d.i}`);
      d.conds.forEach(({ c, j }, n) => {
        const last = k === withConds.length - 1 && n === d.conds.length - 1;
        const head = n === 0 ? `        ${d.s.name.trim()} AS ` : "          AND ";
        add(head + condSQL(d.s.name.trim(), c) + (last ? "" : n === d.conds.length - 1 ? "," : ""), `cond-${d.i}-${j}`);
      });
    });
  }
  add(") AS match_result");
  return { sql: lines.join("\n") + "\n", parts };
}

// fieldPaths lists the leaf fields of JSON events as dotted paths, sorted.
export function fieldPaths(events: Uint8Array[]): string[] {
  const out = new Set<string>();
  const walk = (v: unknown, path: string) => {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k);
    } else if (path) out.add(path);
  };
  const dec = new TextDecoder();
  for (const e of events) {
    try {
      walk(JSON.parse(dec.decode(e)), "");
    } catch {
      // not JSON: the engine dead-letters it, it offers no field
    }
  }
  return [...out].sort();
}

// useSourceFields offers the fields of the source's latest events (an
// operator's: the events may hold what a reader is not to see).
function useSourceFields(source: string, known: string[] | undefined, operator: boolean): string[] {
  const [fields, setFields] = useState<string[]>([]);
  useEffect(() => {
    setFields([]);
    if (!operator || !known?.includes(source)) return;
    const ctl = new AbortController();
    sources.sampleSource({ name: source, limit: 50 }, { signal: ctl.signal }).then(
      (r) => setFields(fieldPaths(r.events)),
      () => {},
    );
    return () => ctl.abort();
  }, [source, known?.join(","), operator]);
  return fields;
}

// fromSQL reads a query back into the form, when the form can write it:
// exactly this text, as toSQL writes it (so a hand edit of a value, a
// condition or a step keeps the form in step); null when it cannot.
export function fromSQL(sql: string): Form | null {
  const f = emptyForm();
  f.steps = [];
  const ls = sql.split("\n");
  let i = 0;
  const next = (re: RegExp): RegExpExecArray | null => {
    const m = i < ls.length ? re.exec(ls[i]) : null;
    if (m) i++;
    return m;
  };
  if (!next(/^SELECT \*$/)) return null;
  if (next(/^FROM \($/)) {
    if (!next(/^ {2}SELECT$/)) return null;
    for (let m; (m = next(/^ {4}(.+?)(?: AS ([^\s,]+))?,?$/)); ) f.columns.push({ expr: m[1], as: m[2] ?? "" });
    const src = next(/^ {2}FROM (.+)$/);
    if (!src || !next(/^\)$/)) return null;
    f.source = src[1];
  } else {
    const src = next(/^FROM (.+)$/);
    if (!src) return null;
    f.source = src[1];
  }
  if (!next(/^MATCH_RECOGNIZE \($/)) return null;
  f.partition = next(/^ {4}PARTITION BY (.+)$/)?.[1] ?? "";
  f.order = next(/^ {4}ORDER BY (.+)$/)?.[1] ?? "";
  const measures: string[] = [];
  if (next(/^ {4}MEASURES$/)) for (let m; (m = next(/^ {8}(.+?),?$/)); ) measures.push(m[1]);
  if (!next(/^ {4}ONE ROW PER MATCH$/)) return null;
  const after = next(/^ {4}AFTER MATCH SKIP (.+)$/);
  const pattern = next(/^ {4}PATTERN \((.+)\)$/);
  if (!after || !pattern) return null;
  f.after = after[1];
  for (const tok of pattern[1].split(" ")) {
    const m = /^(\w+)(\+|\*|\?|\{\d+\}|\{\d*,\d*\})?(\?)?$/.exec(tok);
    if (!m) return null;
    const s = newStep(m[1]);
    s.conds = [];
    const q = m[2] ?? "";
    const range = /^\{(\d*)(,?)(\d*)\}$/.exec(q);
    if (q === "{2,}") s.quant = "2+";
    else if (range && !range[2]) [s.quant, s.n] = ["n", range[1]];
    else if (range) [s.quant, s.n, s.m] = ["nm", range[1], range[3]];
    else s.quant = q || "1";
    s.reluctant = !!m[3];
    f.steps.push(s);
  }
  const within = next(/^ {4}WITHIN INTERVAL '(\d+)' (\w+)$/);
  if (within) [f.withinN, f.withinUnit] = [within[1], within[2]];
  if (next(/^ {4}DEFINE$/)) {
    let desc = "";
    let step: Step | undefined;
    for (;;) {
      const d = next(/^ {8}-- (.*)$/);
      if (d) {
        desc = d[1];
        continue;
      }
      const head = next(/^ {8}(\w+) AS (.+?),?$/);
      const and = head ? null : next(/^ {10}AND (.+?),?$/);
      if (head) {
        step = f.steps.find((s) => s.name === head[1]);
        if (!step) return null;
        step.description = desc;
        desc = "";
      }
      const c = head?.[2] ?? and?.[1];
      if (c === undefined || !step) break;
      const simple = new RegExp(`^${step.name}\\.([\\w.]+) (IS NOT NULL|IS NULL|!=|<=|>=|=|<|>)(?: (.+))?$`).exec(c);
      // a value the form would write otherwise (a field, a call) is an expression
      if (simple && (simple[2].startsWith("IS") ? simple[3] === undefined : simple[3] !== undefined && literal(simple[3]) === simple[3]))
        step.conds.push({ mode: "simple", field: simple[1], op: simple[2], value: simple[3] ?? "", expr: "" });
      else step.conds.push({ mode: "expr", field: "", op: "=", value: "", expr: c });
    }
  }
  const names = f.steps.map((s) => s.name);
  for (const ms of measures) {
    const m = /^(?:(FIRST|LAST)\((.+)\)|(.+?))(?: AS (\S+))?$/.exec(ms);
    if (!m) return null;
    const e = m[2] ?? m[3];
    const dot = e.indexOf(".");
    const st = dot > 0 && names.includes(e.slice(0, dot)) ? e.slice(0, dot) : "";
    f.measures.push({ step: st, fn: (m[1] ?? "") as Measure["fn"], expr: st ? e.slice(dot + 1) : e, as: m[4] ?? "" });
  }
  if (!next(/^\) AS match_result$/)) return null;
  return toSQL(f).sql === sql ? f : null;
}

// partLabel names a part of the form as a person reads it.
function partLabel(f: Form, part: string): string {
  const [kind, a, b] = part.split("-");
  const i = Number(a);
  switch (kind) {
    case "cond":
      return `Condition ${Number(b) + 1} of step ${f.steps[i]?.name || i + 1}`;
    case "step":
      return `Step ${f.steps[i]?.name || i + 1}`;
    case "measure":
      return `Measure ${i + 1}`;
    case "column":
      return `Column ${i + 1}`;
  }
  return { source: "Source", partition: "Partition by", order: "Order by", after: "After a match", pattern: "Steps", within: "Within" }[kind] ?? "The query";
}

function FieldError(props: { id: string; msg: string | undefined }) {
  if (!props.msg) return null;
  return (
    <p class="field-error" id={props.id} role="alert">
      <Status kind="bad">{props.msg}</Status>
    </p>
  );
}

export function BuilderPage(props: { role: Role | null }) {
  const [f, setF] = useState<Form>(emptyForm);
  const [hand, setHand] = useState<string | null>(null); // the query as edited by hand
  const [problem, setProblem] = useState<{ sql: string; error: SpecError; part: string } | null>(null);
  const [valid, setValid] = useState<{ sql: string; name: string } | null>(null); // what was found valid
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const { data: srcs } = usePoll((signal) => sources.listSources({}, { signal }), 30000, []);
  const gen = useMemo(() => toSQL(f), [f]);
  const sourceFields = useSourceFields(f.source.trim(), srcs?.sources.map((s) => s.name), mayOperate(props.role));
  const sql = hand ?? gen.sql;
  const name = f.name.trim();
  const drawn = useExplained(name ? sql : "", name);
  // valid as it stands: this query under this name (SQL needs one)
  const isValid = valid !== null && valid.sql === sql && valid.name === name && name !== "";

  // validated a moment after the last change: the error goes to the part
  // of the form that wrote its line
  useEffect(() => {
    if (!name) return;
    const ctl = new AbortController();
    const timer = setTimeout(async () => {
      try {
        const v = await patterns.validatePattern({ spec: sql, name }, { signal: ctl.signal });
        if (ctl.signal.aborted) return;
        if (v.valid) {
          setProblem(null);
          setValid({ sql, name });
        } else if (v.error) {
          setValid(null);
          const part = hand === null && v.error.line > 0 ? (gen.parts[v.error.line - 1] ?? "") : "";
          setProblem({ sql, error: v.error, part });
        }
      } catch {
        // the next change asks again
      }
    }, 400);
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [sql, name]);

  const set = (g: (f: Form) => void) => {
    const c = structuredClone(f);
    g(c);
    setF(c);
  };
  // the part names the place: the query's line:column is left out
  const errOf = (part: string) =>
    problem && problem.part === part && problem.sql === sql ? `${partLabel(f, part)}: ${problem.error.message.replace(/^line \d+:\d+: /, "")}` : undefined;
  const described = (part: string) => (errOf(part) ? { "aria-invalid": true, "aria-describedby": "err-" + part } : {});
  // a condition reads the columns, or the source's fields when none
  const fields = f.columns.length ? f.columns.map((c) => c.as.trim() || c.expr.trim().split(".").pop() || "").filter(Boolean) : sourceFields;
  const stepNames = f.steps.map((s) => s.name.trim()).filter(Boolean);

  const deploy = async () => {
    setBusy(true);
    setErr(null);
    setDone(null);
    try {
      const r = await patterns.deployPattern({ spec: sql, name });
      setDone(r.pattern?.name ?? name);
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="build-h" class="builder">
      <h1 id="build-h">Build a pattern</h1>
      <p class="hint">
        The form writes a SQL MATCH_RECOGNIZE query, shown below it; the automaton is redrawn and the query validated as the form changes.
      </p>
      <DraftAutomaton drawn={drawn} spec={sql} invalid={problem?.sql === sql} />
      <div class="pattern-grid">
        <form class="build" onSubmit={(e) => e.preventDefault()}>
          <div class="row">
            <label for="b-name">Pattern name</label>
            <input id="b-name" value={f.name} onInput={(e) => set((c) => (c.name = e.currentTarget.value))} required />
          </div>
          <div class="row">
            <label for="b-source">Source</label>
            <input id="b-source" list="b-sources" value={f.source} onInput={(e) => set((c) => (c.source = e.currentTarget.value))} {...described("source")} />
            <datalist id="b-sources">
              {srcs?.sources.map((s) => <option value={s.name} key={s.name} />)}
            </datalist>
            <FieldError id="err-source" msg={errOf("source")} />
          </div>
          <fieldset>
            <legend>Columns (optional: the source's fields to read, renamed)</legend>
            {f.columns.map((col, i) => (
              <div class="row inline" key={i}>
                <label for={`b-col-${i}-expr`}>Column {i + 1}: field</label>
                <input id={`b-col-${i}-expr`} list="b-source-fields" value={col.expr} onInput={(e) => set((c) => (c.columns[i].expr = e.currentTarget.value))} {...described(`column-${i}`)} />
                <label for={`b-col-${i}-as`}>as</label>
                <input id={`b-col-${i}-as`} value={col.as} onInput={(e) => set((c) => (c.columns[i].as = e.currentTarget.value))} />
                <button type="button" aria-label={`Remove column ${i + 1}`} onClick={() => set((c) => c.columns.splice(i, 1))}>
                  ✕
                </button>
                <FieldError id={`err-column-${i}`} msg={errOf(`column-${i}`)} />
              </div>
            ))}
            <button type="button" id="b-add-col" onClick={() => set((c) => c.columns.push({ expr: "", as: "" }))}>
              Add a column
            </button>
          </fieldset>
          <datalist id="b-source-fields">
            {sourceFields.map((x) => <option value={x} key={x} />)}
          </datalist>
          <datalist id="b-fields">
            {fields.map((x) => <option value={x} key={x} />)}
          </datalist>
          <div class="row">
            <label for="b-partition">Partition by (the key)</label>
            <input id="b-partition" list="b-fields" value={f.partition} onInput={(e) => set((c) => (c.partition = e.currentTarget.value))} {...described("partition")} />
            <FieldError id="err-partition" msg={errOf("partition")} />
          </div>
          <div class="row">
            <label for="b-order">Order by (event time; empty: arrival order)</label>
            <input id="b-order" list="b-fields" value={f.order} onInput={(e) => set((c) => (c.order = e.currentTarget.value))} {...described("order")} />
            <FieldError id="err-order" msg={errOf("order")} />
          </div>
          <h2>Steps</h2>
          <FieldError id="err-pattern" msg={errOf("pattern")} />
          <ol class="steps">
            {f.steps.map((s, i) => {
              const q = quantifiers.find((x) => x.v === s.quant) ?? quantifiers[0];
              return (
                <li key={i}>
                  <fieldset>
                    <legend>Step {i + 1}</legend>
                    <div class="row inline">
                      <label for={`b-step-${i}-name`}>Name</label>
                      <input id={`b-step-${i}-name`} class="short" value={s.name} onInput={(e) => set((c) => (c.steps[i].name = e.currentTarget.value))} />
                      <label for={`b-step-${i}-quant`}>Quantifier</label>
                      <select id={`b-step-${i}-quant`} value={s.quant} onChange={(e) => set((c) => (c.steps[i].quant = e.currentTarget.value))}>
                        {quantifiers.map((x) => (
                          <option value={x.v} key={x.v}>
                            {x.label}
                          </option>
                        ))}
                      </select>
                      {(s.quant === "n" || s.quant === "nm") && (
                        <>
                          <label for={`b-step-${i}-n`}>n</label>
                          <input id={`b-step-${i}-n`} type="number" min="0" class="short" value={s.n} onInput={(e) => set((c) => (c.steps[i].n = e.currentTarget.value))} />
                        </>
                      )}
                      {s.quant === "nm" && (
                        <>
                          <label for={`b-step-${i}-m`}>m</label>
                          <input id={`b-step-${i}-m`} type="number" min="1" class="short" value={s.m} onInput={(e) => set((c) => (c.steps[i].m = e.currentTarget.value))} />
                        </>
                      )}
                      <label>
                        <input
                          type="checkbox"
                          id={`b-step-${i}-reluctant`}
                          disabled={!q.reluctant}
                          checked={q.reluctant && s.reluctant}
                          onChange={(e) => set((c) => (c.steps[i].reluctant = e.currentTarget.checked))}
                        />{" "}
                        reluctant (as few as match)
                      </label>
                    </div>
                    <div class="row">
                      <label for={`b-step-${i}-desc`}>Description</label>
                      <input id={`b-step-${i}-desc`} value={s.description} onInput={(e) => set((c) => (c.steps[i].description = e.currentTarget.value))} {...described(`step-${i}`)} />
                      <FieldError id={`err-step-${i}`} msg={errOf(`step-${i}`)} />
                    </div>
                    <p class="hint">Conditions, all of which an event must meet (none: any event)</p>
                    {s.conds.map((c, j) => {
                      const id = `b-step-${i}-cond-${j}`;
                      const part = `cond-${i}-${j}`;
                      return (
                        <div class="row inline cond" key={j}>
                          <label for={id + "-mode"}>Condition {j + 1}</label>
                          <select id={id + "-mode"} value={c.mode} onChange={(e) => set((x) => (x.steps[i].conds[j].mode = e.currentTarget.value as Cond["mode"]))}>
                            <option value="simple">simple</option>
                            <option value="expr">expression</option>
                          </select>
                          {c.mode === "simple" ? (
                            <>
                              <input id={id + "-field"} aria-label={`Condition ${j + 1} of step ${s.name}: field`} list="b-fields" value={c.field} onInput={(e) => set((x) => (x.steps[i].conds[j].field = e.currentTarget.value))} {...described(part)} />
                              <select id={id + "-op"} aria-label={`Condition ${j + 1} of step ${s.name}: operator`} value={c.op} onChange={(e) => set((x) => (x.steps[i].conds[j].op = e.currentTarget.value))}>
                                {ops.map((o) => (
                                  <option value={o} key={o}>
                                    {o}
                                  </option>
                                ))}
                              </select>
                              {!c.op.startsWith("IS") && (
                                <input id={id + "-value"} aria-label={`Condition ${j + 1} of step ${s.name}: value`} class="short" value={c.value} onInput={(e) => set((x) => (x.steps[i].conds[j].value = e.currentTarget.value))} />
                              )}
                            </>
                          ) : (
                            <input id={id + "-expr"} class="wide" aria-label={`Condition ${j + 1} of step ${s.name}: expression`} value={c.expr} onInput={(e) => set((x) => (x.steps[i].conds[j].expr = e.currentTarget.value))} {...described(part)} />
                          )}
                          <button type="button" aria-label={`Remove condition ${j + 1} of step ${s.name}`} onClick={() => set((x) => x.steps[i].conds.splice(j, 1))}>
                            ✕
                          </button>
                          <FieldError id={"err-" + part} msg={errOf(part)} />
                        </div>
                      );
                    })}
                    <div class="toolbar">
                      <button type="button" id={`b-step-${i}-add-cond`} onClick={() => set((x) => x.steps[i].conds.push(newCond()))}>
                        Add a condition to {s.name || `step ${i + 1}`}
                      </button>
                      {f.steps.length > 1 && (
                        <button type="button" onClick={() => set((x) => x.steps.splice(i, 1))}>
                          Remove step {s.name || i + 1}
                        </button>
                      )}
                    </div>
                  </fieldset>
                </li>
              );
            })}
          </ol>
          <button type="button" id="b-add-step" onClick={() => set((c) => c.steps.push(newStep(String.fromCharCode(65 + (c.steps.length % 26)))))}>
            Add a step
          </button>
          <fieldset>
            <legend>Measures (the fields of a match)</legend>
            {f.measures.map((m, i) => (
              <div class="row inline" key={i}>
                <label for={`b-measure-${i}-step`}>Measure {i + 1}: step</label>
                <select id={`b-measure-${i}-step`} value={m.step} onChange={(e) => set((c) => (c.measures[i].step = e.currentTarget.value))}>
                  <option value="">none</option>
                  {stepNames.map((n) => (
                    <option value={n} key={n}>
                      {n}
                    </option>
                  ))}
                </select>
                <label for={`b-measure-${i}-fn`}>of its</label>
                <select id={`b-measure-${i}-fn`} value={m.fn} onChange={(e) => set((c) => (c.measures[i].fn = e.currentTarget.value as Measure["fn"]))}>
                  <option value="">event (the last)</option>
                  <option value="FIRST">FIRST event</option>
                  <option value="LAST">LAST event</option>
                </select>
                <label for={`b-measure-${i}-expr`}>expression</label>
                <input id={`b-measure-${i}-expr`} list="b-fields" value={m.expr} onInput={(e) => set((c) => (c.measures[i].expr = e.currentTarget.value))} {...described(`measure-${i}`)} />
                <label for={`b-measure-${i}-as`}>output field</label>
                <input id={`b-measure-${i}-as`} value={m.as} onInput={(e) => set((c) => (c.measures[i].as = e.currentTarget.value))} />
                <button type="button" aria-label={`Remove measure ${i + 1}`} onClick={() => set((c) => c.measures.splice(i, 1))}>
                  ✕
                </button>
                <FieldError id={`err-measure-${i}`} msg={errOf(`measure-${i}`)} />
              </div>
            ))}
            <button type="button" id="b-add-measure" onClick={() => set((c) => c.measures.push({ step: "", fn: "", expr: "", as: "" }))}>
              Add a measure
            </button>
          </fieldset>
          <div class="row inline">
            <label for="b-within-n">Within (empty: no window)</label>
            <input id="b-within-n" type="number" min="1" class="short" value={f.withinN} onInput={(e) => set((c) => (c.withinN = e.currentTarget.value))} {...described("within")} />
            <select id="b-within-unit" aria-label="Unit of the window" value={f.withinUnit} onChange={(e) => set((c) => (c.withinUnit = e.currentTarget.value))}>
              {units.map((u) => (
                <option value={u} key={u}>
                  {u.toLowerCase()}s
                </option>
              ))}
            </select>
            <FieldError id="err-within" msg={errOf("within")} />
          </div>
          <div class="row">
            <label for="b-after">After a match</label>
            <select id="b-after" value={f.after} onChange={(e) => set((c) => (c.after = e.currentTarget.value))}>
              <option value="PAST LAST ROW">skip past its last event</option>
              <option value="TO NEXT ROW">skip to the event after its first</option>
              {stepNames.map((n) => (
                <option value={`TO FIRST ${n}`} key={"f" + n}>
                  skip to its first {n}
                </option>
              ))}
              {stepNames.map((n) => (
                <option value={`TO LAST ${n}`} key={"l" + n}>
                  skip to its last {n}
                </option>
              ))}
            </select>
            <FieldError id="err-after" msg={errOf("after")} />
          </div>
        </form>
        <div>
          <h2>
            <label for="b-sql">The query</label>
          </h2>
          {hand !== null && (
            <p>
              <Status kind="warn">Edited by hand beyond what the form writes: the form no longer writes it.</Status>{" "}
              <button type="button" onClick={() => setHand(null)}>
                Back to the form's query
              </button>
            </p>
          )}
          <textarea
            id="b-sql"
            rows={24}
            spellcheck={false}
            value={sql}
            onInput={(e) => {
              // an edit the form can write goes into the form
              const text = e.currentTarget.value;
              const back = fromSQL(text);
              if (back) {
                back.name = f.name; // the query names no pattern
                setF(back);
                setHand(null);
              } else setHand(text);
            }}
          />
          {!name && <p class="hint">Name the pattern to validate it and draw its automaton.</p>}
          {problem && problem.sql === sql && (problem.part === "" ? <SpecProblem spec={sql} error={problem.error} /> : <p class="hint">Not valid: see the form.</p>)}
          {isValid && (
            <p role="status" class="b-valid">
              <Status kind="ok">Valid</Status>
            </p>
          )}
          {mayOperate(props.role) && (
            <p>
              <button type="button" id="b-deploy" disabled={busy || !isValid} onClick={deploy}>
                Deploy {name || "the pattern"}
              </button>
            </p>
          )}
          <ErrorBox error={err} />
          {done && (
            <p role="status">
              <Status kind="ok">Deployed</Status> <a href={"#/patterns/" + encodeURIComponent(done)}>{done}</a>
            </p>
          )}
        </div>
      </div>
    </section>
  );
}
