// o200k_base token counts of texts, offline (npm gpt-tokenizer, installed by .ci/setup).
//   node benchmarks/count_tokens.cjs < texts.json   (a JSON array of strings) -> a JSON array of counts
// The package is looked up under AMID_NPM_PREFIX (default ~/.cache/amid/npm), then on the usual paths.
const os = require("os");
const path = require("path");

function tokenizer() {
  const prefix = process.env.AMID_NPM_PREFIX || path.join(os.homedir(), ".cache", "amid", "npm");
  for (const where of [path.join(prefix, "node_modules", "gpt-tokenizer", "cjs", "encoding", "o200k_base.js"),
    "gpt-tokenizer/cjs/encoding/o200k_base"]) {
    try {
      return require(where);
    } catch (error) {
      if (error.code !== "MODULE_NOT_FOUND") throw error;
    }
  }
  throw new Error(`gpt-tokenizer not found under ${prefix}/node_modules (run .ci/setup)`);
}

const chunks = [];
process.stdin.on("data", (chunk) => chunks.push(chunk));
process.stdin.on("end", () => {
  const { countTokens } = tokenizer();
  const texts = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  process.stdout.write(JSON.stringify(texts.map((text) => countTokens(text))));
});
