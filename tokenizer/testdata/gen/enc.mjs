import { Tokenizer } from "@huggingface/tokenizers";
import fs from "fs";
const [,, tokPath, casesPath, outPath] = process.argv;
const tj = JSON.parse(fs.readFileSync(tokPath, "utf8"));
const tok = new Tokenizer(tj, {});
const out = [];
for (const line of fs.readFileSync(casesPath, "utf8").split("\n")) {
  if (!line) continue;
  const s = JSON.parse(line);
  const ids = tok.encode(s, { add_special_tokens: false }).ids;
  out.push(JSON.stringify({ ids, dec: tok.decode(ids, { clean_up_tokenization_spaces: false }), decskip: tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }) }));
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
