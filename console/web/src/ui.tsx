// Small pieces the pages share.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { Code, ConnectError } from "@connectrpc/connect";

// Status marks trouble with a word and a sign, not by colour alone.
export function Status(props: { kind: "ok" | "warn" | "bad"; children: ComponentChildren }) {
  const sign = props.kind === "ok" ? "✓" : props.kind === "warn" ? "⚠" : "✖";
  return (
    <span class={"status " + props.kind}>
      <span aria-hidden="true">{sign} </span>
      {props.children}
    </span>
  );
}

export function errorText(e: unknown): string {
  if (e instanceof ConnectError && e.code === Code.Unauthenticated) {
    return "The node does not take the token (any more): sign out and in again.";
  }
  if (e instanceof ConnectError) return `${e.rawMessage} (${codeName(e.code)})`;
  if (e instanceof Error) return e.message;
  return String(e);
}

function codeName(c: number): string {
  const names = [
    "ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
    "already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
    "aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss",
    "unauthenticated",
  ];
  return names[c] ?? String(c);
}

export function ErrorBox(props: { error: unknown }) {
  if (props.error == null) return null;
  return (
    <p class="error" role="alert">
      <Status kind="bad">{errorText(props.error)}</Status>
    </p>
  );
}

// usePoll calls load now and every ms milliseconds until the component
// goes away (or deps change), keeping the last answer while a new one
// comes. Calls get an AbortSignal that leaving aborts.
export function usePoll<T>(load: (s: AbortSignal) => Promise<T>, ms: number, deps: unknown[]) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [at, setAt] = useState<Date | null>(null);
  useEffect(() => {
    const ctl = new AbortController();
    let timer = 0;
    const tick = async () => {
      try {
        const d = await load(ctl.signal);
        if (ctl.signal.aborted) return;
        setData(d);
        setError(null);
        setAt(new Date());
      } catch (e) {
        if (ctl.signal.aborted) return;
        setError(e);
      }
      timer = window.setTimeout(tick, ms);
    };
    tick();
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, deps);
  return { data, error, at };
}

export function Updated(props: { at: Date | null }) {
  return <p class="updated">{props.at ? "Updated " + props.at.toLocaleTimeString() : "Loading…"}</p>;
}

// Table wraps a table so that it scrolls sideways on a narrow screen
// rather than the page.
export function Table(props: { caption: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={props.caption}>
      <table>
        <caption>{props.caption}</caption>
        {props.children}
      </table>
    </div>
  );
}

export function fmtMs(ms: bigint | number): string {
  const n = Number(ms);
  const d = new Date(n);
  return isNaN(d.getTime()) ? String(ms) : d.toISOString().replace("T", " ").replace("Z", " UTC");
}

export function fmtNum(n: bigint | number | undefined): string {
  return n === undefined ? "—" : Number(n).toLocaleString("en");
}

// The SVG the server draws uses these elements only; anything else (a
// script, a foreignObject, an image that loads something) is dropped.
const svgElements = new Set(["svg", "g", "defs", "marker", "path", "rect", "circle", "ellipse", "line", "polyline", "polygon", "text", "tspan", "title"]);

// sanitizeSVG parses an SVG document and keeps only drawing elements and
// attributes: no event handlers, links, styles or references to other
// documents. The result goes into the page, where the CSP would block
// inline styles anyway; text in it is real text (selectable, read aloud).
export function sanitizeSVG(text: string): SVGSVGElement | null {
  // handlers and styles go before parsing, too: the browser would refuse
  // them by the page's policy even in an inert document, but report it
  const pre = text.replace(/\s(?:on[\w-]*|style)\s*=\s*(?:"[^"]*"|'[^']*')/gi, "");
  const doc = new DOMParser().parseFromString(pre, "image/svg+xml");
  const root = doc.documentElement;
  if (root.nodeName !== "svg" || doc.getElementsByTagName("parsererror").length) return null;
  const clean = (el: Element): boolean => {
    if (!svgElements.has(el.localName) || el.namespaceURI !== "http://www.w3.org/2000/svg") return false;
    for (const a of [...el.attributes]) {
      const bad = /^on|href$|^style$/i.test(a.localName) || /javascript:|url\((?!#)/i.test(a.value);
      if (bad) el.removeAttributeNode(a);
    }
    for (const c of [...el.children]) if (!clean(c)) c.remove();
    return true;
  };
  if (!clean(root)) return null;
  root.setAttribute("role", "img");
  return document.importNode(root, true) as unknown as SVGSVGElement;
}

// SVG shows a server-drawn SVG, sanitized, labelled by label.
export function SVG(props: { svg: string; label: string; class?: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = sanitizeSVG(props.svg);
    if (!box.current) return;
    if (el) el.setAttribute("aria-label", props.label);
    box.current.replaceChildren(...(el ? [el] : []));
  }, [props.svg, props.label]);
  return <div class={props.class} ref={box} tabIndex={0} />;
}
