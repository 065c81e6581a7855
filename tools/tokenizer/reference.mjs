// tools/tokenizer/reference.mjs — reference token ids from an independent implementation, for
// tests/tokenizer: Hugging Face's JavaScript port of `tokenizers` (@huggingface/tokenizers, installed in
// build/npm-tools by scripts/install-deps).
//
//   node tools/tokenizer/reference.mjs <npm-tools-dir> <tokenizer-dir> <corpus.json> <out.json>
//
// corpus.json is {"texts": [...], "id_lists": [[...], ...]}. The texts are hex-encoded byte strings (so
// that invalid UTF-8 and NUL survive the trip), each decoded with TextDecoder, which replaces invalid
// UTF-8 by U+FFFD with the WHATWG maximal-subpart rule; ignoreBOM keeps a leading U+FEFF as text, as
// Rust's String::from_utf8_lossy and helium do. out.json gets, per text:
//   ids          encode(text, {add_special_tokens: false}).ids
//   ids_special  encode(text, {add_special_tokens: true}).ids
//   decoded      decode(ids), hex-encoded UTF-8
//   decoded_skip decode(ids, {skip_special_tokens: true}), hex-encoded UTF-8
// and per id list (arbitrary ids, so also byte tokens that do not form valid UTF-8), "decoded" and
// "decoded_skip" likewise.
// decode runs with clean_up_tokenization_spaces: false: the Rust library's decode (which helium follows)
// has no such step; it is a Python `transformers` post-processing option.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [npmTools, tokenizerDir, corpusPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node reference.mjs <npm-tools-dir> <tokenizer-dir> <corpus.json> <out.json>");
  process.exit(2);
}

// Resolved from build/npm-tools rather than from this file's folder, where there is no node_modules.
const require = createRequire(path.join(path.resolve(npmTools), "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");

const tokenizerJson = JSON.parse(readFileSync(path.join(tokenizerDir, "tokenizer.json"), "utf8"));
let tokenizerConfig = {};
try {
  tokenizerConfig = JSON.parse(readFileSync(path.join(tokenizerDir, "tokenizer_config.json"), "utf8"));
} catch (e) {
  if (e.code !== "ENOENT") throw e;
}
const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);

const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });
const toHex = (text) => Buffer.from(text, "utf8").toString("hex");
// The JavaScript port throws on an empty id list; the Rust library returns "".
const decode = (ids, options) =>
  ids.length === 0 ? "" : tokenizer.decode(ids, { clean_up_tokenization_spaces: false, ...options });

const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));
const results = corpus.texts.map((hex) => {
  const text = textDecoder.decode(Buffer.from(hex, "hex"));
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  const idsSpecial = tokenizer.encode(text, { add_special_tokens: true }).ids;
  return {
    ids,
    ids_special: idsSpecial,
    decoded: toHex(decode(ids, {})),
    decoded_skip: toHex(decode(ids, { skip_special_tokens: true })),
  };
});
const idResults = corpus.id_lists.map((ids) => ({
  decoded: toHex(decode(ids, {})),
  decoded_skip: toHex(decode(ids, { skip_special_tokens: true })),
}));
writeFileSync(outPath, JSON.stringify({ tokenizer: tokenizerDir, results, id_results: idResults }));
