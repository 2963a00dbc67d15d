// The console's shell: sign-in, navigation and the hash router.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { getToken, setToken, whoami, type Role } from "./api";
import { ClusterPage } from "./cluster";
import { DeployPage, PatternPage, PatternsPage } from "./patterns";
import { SourcesPage } from "./sources";
import { SavepointsPage } from "./savepoints";
import { BuilderPage } from "./builder";
import { ErrorBox } from "./ui";
import "./style.css";

function useHash(): string {
  const [h, setH] = useState(location.hash);
  useEffect(() => {
    const on = () => setH(location.hash);
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return h;
}

function App() {
  const hash = useHash();
  const [role, setRole] = useState<Role | null | undefined>(undefined); // undefined: asking
  const [err, setErr] = useState<unknown>(null);
  const [tokenSeq, setTokenSeq] = useState(0);
  useEffect(() => {
    whoami().then(setRole, setErr);
  }, [tokenSeq]);
  const signIn = (t: string) => {
    setToken(t);
    setRole(undefined);
    setTokenSeq(tokenSeq + 1);
  };
  const path = hash.replace(/^#/, "") || "/";
  const route = path.split("/").filter(Boolean);
  const cur =
    route[0] === "patterns" || route[0] === "deploy" || route[0] === "build" ? "patterns" : route[0] === "sources" || route[0] === "savepoints" ? route[0] : "cluster";
  let page;
  if (role === null) page = <SignIn onToken={signIn} refused={getToken() !== ""} />;
  else if (role === undefined) page = <p>Loading…</p>;
  else if (route[0] === "patterns" && route[1]) page = <PatternPage key={route[1]} name={decodeURIComponent(route[1])} role={role} />;
  else if (route[0] === "patterns") page = <PatternsPage role={role} />;
  else if (route[0] === "deploy") page = <DeployPage role={role} />;
  else if (route[0] === "build") page = <BuilderPage role={role} />;
  else if (route[0] === "sources") page = <SourcesPage />;
  else if (route[0] === "savepoints") page = <SavepointsPage role={role} />;
  else page = <ClusterPage />;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <span class="brand">cep console</span>
        <nav aria-label="Pages">
          <a href="#/" aria-current={cur === "cluster" ? "page" : undefined}>
            Cluster
          </a>
          <a href="#/patterns" aria-current={cur === "patterns" ? "page" : undefined}>
            Patterns
          </a>
          <a href="#/sources" aria-current={cur === "sources" ? "page" : undefined}>
            Sources
          </a>
          <a href="#/savepoints" aria-current={cur === "savepoints" ? "page" : undefined}>
            Savepoints
          </a>
        </nav>
        {role && (
          <span class="who">
            Role: <strong>{role}</strong>
            {getToken() && (
              <button type="button" onClick={() => signIn("")}>
                Sign out
              </button>
            )}
          </span>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        <ErrorBox error={err} />
        {page}
      </main>
    </>
  );
}

function SignIn(props: { onToken: (t: string) => void; refused: boolean }) {
  const [t, setT] = useState("");
  return (
    <section aria-labelledby="signin-h">
      <h1 id="signin-h">Sign in</h1>
      {props.refused && (
        <p class="error" role="alert">
          The node does not know that token.
        </p>
      )}
      <form
        class="signin"
        onSubmit={(e) => {
          e.preventDefault();
          props.onToken(t.trim());
        }}
      >
        <label for="token">API token</label>
        <input id="token" type="password" autocomplete="off" value={t} onInput={(e) => setT(e.currentTarget.value)} required />
        <button type="submit">Sign in</button>
        <p class="hint">The token stays in this tab (session storage) and goes only to this node.</p>
      </form>
    </section>
  );
}

render(<App />, document.getElementById("app")!);

// The module's one export, for the browser test to try the sanitizer on
// hostile input (import("/ui/app.js") returns this module, not a second
// copy of the page).
export { sanitizeSVG } from "./ui";
