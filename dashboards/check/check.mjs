// Checks the dashboards with Grafana's own packages (tests/test_dashboard_schema.py runs it).
//
//   node check.mjs schema FILE...   each dashboard against Grafana's dashboard schema: the JSON
//                                   schema of the `Dashboard` type that @grafana/schema publishes
//                                   (raw/dashboard/x, the schemaVersion-39 JSON model)
//   node check.mjs traceql          a JSON list of TraceQL queries on stdin, parsed with
//                                   @grafana/lezer-traceql, the grammar Grafana's Tempo editor uses
//
// Both print JSON on stdout: {file: [error, ...]} and [{query, errors, attributes}, ...].
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

import { parser } from "@grafana/lezer-traceql";
import Ajv from "ajv";
import { createGenerator } from "ts-json-schema-generator";

const require = createRequire(import.meta.url);
const SCHEMA = dirname(require.resolve("@grafana/schema/package.json"));
// Core panels that @grafana/schema publishes no options schema for.
const PANELS_WITHOUT_SCHEMA = ["traces"];

// Grafana's CUE schema leaves these open (`...`): data sources spread their own query fields into
// an annotation, and variables carry their type's fields (`definition`, ...). The TypeScript types
// generated from it cannot say "open", so the JSON schema opens exactly these again.
const OPEN = ["AnnotationQuery", "AnnotationTarget", "VariableModel"];

function dashboardSchema() {
  const schema = createGenerator({
    path: join(SCHEMA, "dist/types/raw/dashboard/x/types.gen.d.ts"),
    type: "Dashboard",
    skipTypeCheck: true,
  }).createSchema("Dashboard");
  for (const name of OPEN) {
    schema.definitions[name].additionalProperties = true;
  }
  return schema;
}

// A panel plugin's own schema: its Options (panel.options) and FieldConfig
// (fieldConfig.defaults.custom), from raw/composable/<plugin>/panelcfg. Grafana fills in the
// options a dashboard leaves out, so nothing is required there; what is given must be known.
const panelSchemas = new Map();

function panelValidator(ajv, plugin, type) {
  const key = `${plugin}/${type}`;
  if (!panelSchemas.has(key)) {
    const schema = panelSchema(plugin, type);
    panelSchemas.set(key, schema && ajv.compile(schema));
  }
  return panelSchemas.get(key);
}

function panelSchema(plugin, type) {
  const path = join(SCHEMA, "dist/types/raw/composable", plugin, "panelcfg/x/types.gen.d.ts");
  if (!existsSync(path) || !readFileSync(path, "utf8").includes(`export interface ${type} `)) {
    return null;
  }
  const schema = createGenerator({ path, type, skipTypeCheck: true }).createSchema(type);
  return JSON.parse(JSON.stringify(schema), (key, value) => (key === "required" ? undefined : value));
}

function errors(validate, where) {
  return (validate.errors ?? []).map(
    (e) => `${where}${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`,
  );
}

function checkPanels(ajv, dashboard) {
  const out = [];
  const panels = (dashboard.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
  for (const panel of panels) {
    const plugin = panel.type.toLowerCase().replaceAll("-", "");
    const where = `/panels[${panel.title}]`;
    if (panel.type !== "row" && !existsSync(join(SCHEMA, "dist/types/raw/composable", plugin))
        && !PANELS_WITHOUT_SCHEMA.includes(panel.type)) {
      out.push(`${where} ${panel.type} is not a panel plugin of @grafana/schema`);
    }
    for (const [type, value, at] of [
      ["Options", panel.options, "/options"],
      ["FieldConfig", panel.fieldConfig?.defaults?.custom, "/fieldConfig/defaults/custom"],
    ]) {
      const validate = value === undefined ? null : panelValidator(ajv, plugin, type);
      if (validate) {
        validate(value);
        out.push(...errors(validate, where + at));
      }
    }
  }
  return out;
}

function checkSchema(files) {
  const ajv = new Ajv({ allErrors: true, strict: false });
  const validate = ajv.compile(dashboardSchema());
  const out = {};
  for (const file of files) {
    const dashboard = JSON.parse(readFileSync(file, "utf8"));
    validate(dashboard);
    out[file] = [...errors(validate, ""), ...checkPanels(ajv, dashboard)];
  }
  return out;
}

function checkTraceql(queries) {
  return queries.map((query) => {
    const errors = [];
    const attributes = [];
    parser.parse(query).iterate({
      enter(node) {
        if (node.type.isError) errors.push(node.from);
        if (node.name === "AttributeField") attributes.push(query.slice(node.from, node.to));
      },
    });
    return { query, errors, attributes };
  });
}

const [command, ...args] = process.argv.slice(2);
if (command === "schema") {
  console.log(JSON.stringify(checkSchema(args)));
} else if (command === "traceql") {
  console.log(JSON.stringify(checkTraceql(JSON.parse(readFileSync(0, "utf8")))));
} else {
  console.error("usage: node check.mjs schema FILE... | traceql < queries.json");
  process.exit(2);
}
