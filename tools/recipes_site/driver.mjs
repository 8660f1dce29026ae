// Replays vllm-compat's renders with the recipes site's own synthesizer.
//
//   node driver.mjs RECIPES_DIR NODE_MODULES_DIR < jobs.jsonl > results.jsonl
//
// RECIPES_DIR is a recipes checkout (its src/lib/command-synthesis.js is imported
// as is, never copied); NODE_MODULES_DIR holds js-yaml 4, which the checkout's own
// scripts use to read the YAML. Each job line gives the inputs vllm-compat rendered
// with: {id, recipe, variant, strategy, hw, features, modes, ungated, nodeCount,
// pdNodes, followers}. Each result line is {id, argvs: [[role, argv], ...]} with
// vllm-compat's role names ('' head, 'worker N', 'prefill', 'prefill worker N', ...),
// or {id, error}.
import fs from "fs";
import path from "path";
import readline from "readline";
import { createRequire } from "module";
import { pathToFileURL } from "url";

const [recipesDir, nodeModulesDir] = process.argv.slice(2);
if (!recipesDir || !nodeModulesDir) {
  console.error("usage: node driver.mjs RECIPES_DIR NODE_MODULES_DIR < jobs.jsonl");
  process.exit(2);
}
const yaml = createRequire(path.join(nodeModulesDir, "_.js"))("js-yaml");
const synthesis = await import(
  pathToFileURL(path.join(recipesDir, "src", "lib", "command-synthesis.js")).href
);

// Dates become YYYY-MM-DD strings, as build-recipes-api.mjs normalizes them.
function normalizeDates(obj) {
  if (obj instanceof Date) return obj.toISOString().split("T")[0];
  if (Array.isArray(obj)) return obj.map(normalizeDates);
  if (obj && typeof obj === "object") {
    return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, normalizeDates(v)]));
  }
  return obj;
}
const readYaml = (file) => normalizeDates(yaml.load(fs.readFileSync(file, "utf8")));

const taxonomy = readYaml(path.join(recipesDir, "taxonomy.yaml"));
const strategies = {};
for (const dir of ["strategies", "kv_store"]) {
  const full = path.join(recipesDir, dir);
  if (!fs.existsSync(full)) continue;
  for (const f of fs.readdirSync(full).filter((n) => n.endsWith(".yaml")).sort()) {
    const s = readYaml(path.join(full, f));
    strategies[s.name] = s;
  }
}

const recipes = new Map(); // relative path -> parsed recipe
function recipeFor(rel, ungated) {
  const key = `${rel}|${ungated.join(",")}`;
  if (!recipes.has(key)) {
    const r = readYaml(path.join(recipesDir, rel));
    // A gated feature rendered "as if the gate were absent": the same recipe without it.
    for (const f of ungated) if (r.features?.[f]) delete r.features[f].strategies;
    recipes.set(key, r);
  }
  return recipes.get(key);
}

function resolve(job, recipe, pdNodes) {
  return synthesis.resolveCommand(
    recipe, job.variant, job.strategy, job.hw, job.features, strategies, taxonomy,
    [], job.nodeCount, pdNodes, job.modes || {}, null, null,
  );
}

function render(job) {
  const recipe = recipeFor(job.recipe, job.ungated || []);
  const result = resolve(job, recipe, job.pdNodes);
  if (result.deployType === "multi_node") {
    return [["", result.headArgv], ...result.workerArgvs.map((a, i) => [`worker ${i + 1}`, a])];
  }
  if (result.deployType === "pd_cluster") {
    const out = [];
    for (const role of ["prefill", "decode"]) {
      out.push([role, result[role].argv]);
      const nodes = job.followers && job.pdNodes ? Math.max(1, result[role].nodes) : 1;
      for (let rank = 1; rank < nodes; rank++) {
        const pd = { ...job.pdNodes, [role]: { ...job.pdNodes[role], rank } };
        out.push([`${role} worker ${rank}`, resolve(job, recipe, pd)[role].argv]);
      }
    }
    return out;
  }
  return [["", result.argv]];
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
for await (const line of rl) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  try {
    out.push(JSON.stringify({ id: job.id, argvs: render(job) }));
  } catch (e) {
    out.push(JSON.stringify({ id: job.id, error: String(e && e.message || e) }));
  }
  if (out.length >= 2000) {
    process.stdout.write(out.join("\n") + "\n");
    out.length = 0;
  }
}
if (out.length) process.stdout.write(out.join("\n") + "\n");
