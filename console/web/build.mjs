// Builds the console into ../dist: app.js, app.css and index.html. The
// output is committed and must not depend on the machine or the time
// (CI rebuilds it and compares), so no source maps (absolute paths) and
// no build stamps.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const out = new URL("../dist/", import.meta.url).pathname;
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
  outdir: out,
  legalComments: "eof",
  charset: "utf8",
  logLevel: "warning",
});
for (const f of ["index.html", "favicon.svg"]) copyFileSync("src/" + f, out + f);
